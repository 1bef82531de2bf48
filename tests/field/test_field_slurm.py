"""The examples (examples/: the field's scripts) as batch jobs on the real two-node test cluster,
in the two ways users submit them: through tfdist's jobs/ (`sbatch jobs/S.sbatch DIR -- COMMAND`)
and through their own batch script (a login shell with the venv activated and none of tfdist's
variables, then one `srun`). Each script runs one way (the parameter-server tutorial, its
strategy's only script, both ways), and each strategy goes both ways (ROUTES). Each learns digits
(>= 0.90 test accuracy: the scripts are unseeded, tests/field/helpers.py), every process that
trained ends with every variable equal; every task ends."""

from __future__ import annotations

import shlex

import pytest

from tests.field.helpers import BIN, MIN_ACCURACY, TF_KERAS, TOP, epochs_started, results
from tests.helpers import WAIT, requires_horovod
from tests.slurm.test_jobs import N1, N2, run, training_tasks

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# TensorFlow's tutorial reads TF_CONFIG itself: tfdist env writes it.
TUTORIAL = ("bash", "-c", "cd {top} && eval \"$(tfdist env --strategy=multi_worker "
            "--format=shell)\" && exec python examples/tf_multi_worker_tutorial/main.py {out}")
TUTORIAL_KERAS3 = tuple(
    word.replace("tf_multi_worker_tutorial", "tf_multi_worker_tutorial_keras3")
    for word in TUTORIAL)
HOROVOD = pytest.mark.horovod
# name: (jobs/ script, tasks per node, command, result key, its value, processes that train)
SCRIPTS = {
    "horovod_keras": ("horovod", 1, ("python", "{top}/examples/horovod_keras.py", "{out}"), "size",
                      2, 2),
    "horovod_keras3": ("horovod", 1, ("python", "{top}/examples/horovod_keras3.py", "{out}"),
                       "size", 2, 2),
    "horovod_tape": ("horovod", 1, ("python", "{top}/examples/horovod_tape.py", "{out}"), "size", 2,
                     2),
    "tf_multi_worker_tutorial": ("multi_worker", 1, TUTORIAL, "workers", 2, 2),
    # chief, 1 ps, 2 workers: the chief runs the script's fit
    "tf_parameter_server_tutorial":
    ("parameter_server", 2, ("python", "{top}/examples/tf_parameter_server_tutorial.py", "{out}"),
     "workers", 2, 1),
    "tf_keras_backup_and_restore":
    ("multi_worker", 1, ("python", "{top}/examples/tf_keras_backup_and_restore.py", "{out}"),
     "replicas", 2, 2),
    # Keras 3 (`import keras`)
    "tf_multi_worker_tutorial_keras3": ("multi_worker", 1, TUTORIAL_KERAS3, "workers", 2, 2),
    "keras_io_multi_gpu_keras3":
    ("multi_worker", 1, ("python", "{top}/examples/keras_io_multi_gpu.py", "{out}"), "replicas", 2,
     2),
    "keras_io_mnist_convnet_keras3":
    ("multi_worker", 1, ("python", "{top}/examples/keras_io_mnist_convnet.py", "{out}"), "replicas",
     2, 2),
}
# The route each script takes. Every script trains in tests/field/test_field_local.py already
# (tfdist launch); what Slurm adds is the cluster found from SLURM_* and the route: jobs/ (task.sh,
# `srun --label`, MODEL_DIR and PATH set for the command) or the user's own script (plain srun in a
# login shell), and what a route adds is the same for every script of one strategy. So each script
# runs once and each strategy takes both routes: multi_worker with tf-keras (the tutorial on the
# user's own script, tf_keras_backup_and_restore through jobs/, where its epoch lines carry srun's
# rank label) and with Keras 3 (the same, the two keras.io scripts through jobs/), Horovod
# (tf-keras on the user's own script, Keras 3 and the GradientTape loop through jobs/) and the
# parameter-server tutorial, its strategy's only script, both ways.
ROUTES = {
    "horovod_keras": ("own_sbatch", ),
    "horovod_keras3": ("jobs", ),
    "horovod_tape": ("jobs", ),
    "tf_multi_worker_tutorial": ("own_sbatch", ),
    "tf_parameter_server_tutorial": ("jobs", "own_sbatch"),
    "tf_keras_backup_and_restore": ("jobs", ),
    "tf_multi_worker_tutorial_keras3": ("own_sbatch", ),
    "keras_io_multi_gpu_keras3": ("jobs", ),
    "keras_io_mnist_convnet_keras3": ("jobs", ),
}
CASES = [
    pytest.param(name,
                 route,
                 marks=[requires_horovod, HOROVOD] if name.startswith("horovod") else [])
    for name in SCRIPTS for route in ROUTES[name]
]

OWN_SBATCH = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node={per_node}
#SBATCH --cpus-per-task={cpus}
unset TF_USE_LEGACY_KERAS TF_CPP_MIN_LOG_LEVEL TF_CONFIG
{keras}source {bin}/activate
srun {command}
"""
# The scripts run with tf-keras: their users export TensorFlow's switch (TF_KERAS); the others
# run with Keras 3 (the switch unset in their own batch script, "0" through jobs/).
TF_KERAS_SCRIPTS = ("horovod_keras", "horovod_tape", "tf_multi_worker_tutorial",
                    "tf_parameter_server_tutorial", "tf_keras_backup_and_restore")


@pytest.mark.parametrize("name,route", CASES)
def test_field_script_as_a_batch_job(slurm, jobdir, name, route):
    strategy, per_node, command, key, value, processes = SCRIPTS[name]
    command = [word.format(top=TOP, out=jobdir) for word in command]
    if route == "jobs":
        # The job's Keras named (the suite's own environment reaches the job: --export=ALL).
        keras = TF_KERAS if name in TF_KERAS_SCRIPTS else {"TF_USE_LEGACY_KERAS": "0"}
        job = run(slurm, jobdir, f"{strategy}.sbatch", f"runs/{name}", "--", *command, env=keras)
    else:
        script = OWN_SBATCH.format(
            per_node=per_node,
            cpus=2 // per_node,
            keras="export TF_USE_LEGACY_KERAS=1\n" if name in TF_KERAS_SCRIPTS else "",
            bin=BIN,
            command=shlex.join(command))
        job = slurm.sbatch(script, workdir=jobdir, timeout=WAIT)
    assert job.state == "COMPLETED", job.describe()
    res = results(jobdir, processes)  # every variable equal in every process that trained
    assert res[key] == value and res["test_accuracy"] >= MIN_ACCURACY, (res, job.describe())
    if name in ("horovod_keras", "horovod_keras3"):
        assert "finished gradual learning rate warmup" in job.log, job.describe()
    if route == "jobs":
        assert "tfdist job: finished: every task exited 0" in job.log, job.describe()
        if per_node == 1:
            assert training_tasks(job.log) == {0: N1, 1: N2}, job.describe()
        if name == "tf_keras_backup_and_restore":
            assert epochs_started(job.log, "0: ") == list(range(1, 9)), job.describe()
