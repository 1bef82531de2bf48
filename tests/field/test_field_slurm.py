"""The field scripts as batch jobs on the real two-node test cluster: through tfdist's jobs/
(`sbatch jobs/S.sbatch DIR -- python script.py`) and through a user's own batch script (srun,
with `tfdist env` where the script reads TF_CONFIG itself). Each learns digits (>= 0.95)."""

from __future__ import annotations

import pytest

from tests.field.helpers import BIN, HERE, MIN_ACCURACY, epochs_started
from tests.horovod.helpers import requires_horovod
from tests.slurm.test_jobs import N1, N2, run, training_tasks

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def check(job, key, value):
    assert job.state == "COMPLETED", job.describe()
    (res, ) = job.json_files("result.json")
    assert res[key] == value and res["test_accuracy"] >= MIN_ACCURACY, (res, job.describe())
    return res


@requires_horovod
@pytest.mark.horovod
def test_horovod_keras_example_through_jobs(slurm, jobdir):
    job = run(slurm, jobdir, "horovod.sbatch", "runs/hvd", "--", "python",
              f"{HERE}/horovod_keras_digits.py", str(jobdir))
    check(job, "size", 2)
    assert training_tasks(job.log) == {0: N1, 1: N2}, job.describe()
    assert "finished gradual learning rate warmup" in job.log


def test_parameter_server_tutorial_through_jobs(slurm, jobdir):
    # jobs/parameter_server.sbatch: 2 nodes x 2 tasks = chief, 1 ps, 2 workers; every task ends.
    job = run(slurm, jobdir, "parameter_server.sbatch", "runs/ps", "--", "python",
              f"{HERE}/ps_tutorial_digits.py", str(jobdir))
    check(job, "workers", 2)
    assert "tfdist job: finished: every task exited 0" in job.log, job.describe()


def test_plain_keras_script_through_jobs(slurm, jobdir):
    job = run(slurm, jobdir, "multi_worker.sbatch", "runs/plain", "--", "python",
              f"{HERE}/plain_keras_digits.py", str(jobdir))
    check(job, "replicas", 2)
    assert epochs_started(job.log, "0: ") == list(range(1, 9)), job.describe()


# A user's own batch script, as sites document them: a login shell with the venv activated and
# none of tfdist's variables, then one srun step.
USER_JOB = f"""#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=2
unset TF_USE_LEGACY_KERAS TF_CPP_MIN_LOG_LEVEL TF_CONFIG
source {BIN}/activate
"""


def test_tensorflow_multi_worker_tutorial_in_own_sbatch(slurm, jobdir):
    """The tutorial's main.py, unchanged; its hand-written TF_CONFIG lines replaced by tfdist env.
    Without the Keras switch in tfdist env's exports this failed in fit (Keras 3, PerReplica)."""
    script = USER_JOB + (f"cd {HERE}/mwms_tutorial\n"
                         "srun bash -c 'eval \"$(tfdist env --strategy=multi_worker "
                         f"--format=shell)\"; exec python main.py {jobdir}'\n")
    job = slurm.sbatch(script, workdir=jobdir, timeout=300)
    check(job, "workers", 2)


@requires_horovod
@pytest.mark.horovod
def test_horovod_gradient_tape_example_in_own_sbatch(slurm, jobdir):
    """Plain `srun python script.py`: tfdist.init in the script sets Horovod up from SLURM_*."""
    script = USER_JOB + f"srun python {HERE}/horovod_tape_digits.py {jobdir}\n"
    job = slurm.sbatch(script, workdir=jobdir, timeout=300)
    res = check(job, "size", 2)
    assert res["weight_sums"][0] == pytest.approx(res["weight_sums"][1], rel=1e-6), res
