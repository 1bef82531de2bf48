"""The field scripts as batch jobs on the real two-node test cluster, both ways users submit them:
through tfdist's jobs/ (`sbatch jobs/S.sbatch DIR -- COMMAND`) and through their own batch script
(a login shell with the venv activated and none of tfdist's variables, then one `srun`). Each
learns digits (>= 0.95 test accuracy); every task ends."""

from __future__ import annotations

import shlex

import pytest

from tests.field.helpers import BIN, HERE, MIN_ACCURACY, epochs_started
from tests.helpers import requires_horovod
from tests.slurm.test_jobs import N1, N2, run, training_tasks

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# TensorFlow's tutorial reads TF_CONFIG itself: tfdist env writes it (and the Keras switch).
TUTORIAL = ("bash", "-c", "cd {here}/mwms_tutorial && eval \"$(tfdist env --strategy=multi_worker "
            "--format=shell)\" && exec python main.py {out}")
HOROVOD = pytest.mark.horovod
# name: (jobs/ script, tasks per node, command, result key, its value)
SCRIPTS = {
    "horovod_keras":
    ("horovod", 1, ("python", "{here}/horovod_keras_digits.py", "{out}"), "size", 2),
    "horovod_tape": ("horovod", 1, ("python", "{here}/horovod_tape_digits.py", "{out}"), "size", 2),
    "tf_multi_worker_tutorial": ("multi_worker", 1, TUTORIAL, "workers", 2),
    # chief, 1 ps, 2 workers
    "tf_parameter_server_tutorial":
    ("parameter_server", 2, ("python", "{here}/ps_tutorial_digits.py", "{out}"), "workers", 2),
    "plain_keras":
    ("multi_worker", 1, ("python", "{here}/plain_keras_digits.py", "{out}"), "replicas", 2),
}
CASES = [
    pytest.param(name,
                 route,
                 marks=[requires_horovod, HOROVOD] if name.startswith("horovod") else [])
    for name in SCRIPTS for route in ("jobs", "own_sbatch")
]

OWN_SBATCH = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node={per_node}
#SBATCH --cpus-per-task={cpus}
unset TF_USE_LEGACY_KERAS TF_CPP_MIN_LOG_LEVEL TF_CONFIG
source {bin}/activate
srun {command}
"""


@pytest.mark.parametrize("name,route", CASES)
def test_field_script_as_a_batch_job(slurm, jobdir, name, route):
    strategy, per_node, command, key, value = SCRIPTS[name]
    command = [word.format(here=HERE, out=jobdir) for word in command]
    if route == "jobs":
        job = run(slurm, jobdir, f"{strategy}.sbatch", f"runs/{name}", "--", *command)
    else:
        script = OWN_SBATCH.format(per_node=per_node,
                                   cpus=2 // per_node,
                                   bin=BIN,
                                   command=shlex.join(command))
        job = slurm.sbatch(script, workdir=jobdir, timeout=600)
    assert job.state == "COMPLETED", job.describe()
    (res, ) = job.json_files("result.json")
    assert res[key] == value and res["test_accuracy"] >= MIN_ACCURACY, (res, job.describe())
    if "weight_sums" in res:  # GradientTape: both ranks hold the same weights
        assert res["weight_sums"][0] == pytest.approx(res["weight_sums"][1], rel=1e-6), res
    if name == "horovod_keras":
        assert "finished gradual learning rate warmup" in job.log, job.describe()
    if route == "jobs":
        assert "tfdist job: finished: every task exited 0" in job.log, job.describe()
        if per_node == 1:
            assert training_tasks(job.log) == {0: N1, 1: N2}, job.describe()
        if name == "plain_keras":
            assert epochs_started(job.log, "0: ") == list(range(1, 9)), job.describe()
