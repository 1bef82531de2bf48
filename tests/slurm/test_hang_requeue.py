"""A hang in a requeue-enabled batch job (jobs/multi_worker.sbatch): the watchdog ends the first
run, the job is requeued and its second run resumes from the last checkpoint and finishes. The
hang is built into the first run only (a user's pipeline recipe that blocks on rank 1 after 30
batches while SLURM_RESTART_COUNT is unset or 0); the watchdog's T is set small here."""

from __future__ import annotations

import re

import pytest

from tests.helpers import REPO, WAIT
from tests.slurm.test_jobs import submit

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

RECIPE = REPO / "tests" / "distribute" / "blocking_pipeline.py"


def test_a_hang_requeues_once_and_the_job_finishes(slurm, jobdir):
    # digits: 22 steps an epoch per worker, so the hang comes at step 31, mid-epoch 2.
    job_id = submit(slurm, jobdir, "multi_worker.sbatch", "runs/hang", "--epochs=3",
                    f"--pipeline={RECIPE}", "--pipeline_option=block_after=30",
                    "--pipeline_option=first_run_only=true", "--watchdog_timeout=20")
    job = slurm.wait(job_id, jobdir, timeout=WAIT)
    log = job.log
    assert job.state == "COMPLETED", job.describe()
    assert job.info["Restarts"] == "1", job.describe()
    first, _, second = log.partition("(SLURM_RESTART_COUNT=1)")
    m = re.search(r"^0: tfdist: error: stalled: .*$", first, re.M)
    assert m, job.describe()
    line = m.group(0)
    print(f"job {job_id}, first run: {line}")
    assert re.search(
        r"Stopped progressing: rank 1 on tfdist-node2 \(pid \d+\) at step 30: "
        r"waiting for its input pipeline", line), line
    assert line.endswith("Requeued the job (restart 1 of at most 2, TFDIST_MAX_RESTARTS); it "
                         "resumes from the last checkpoint."), line
    assert re.search(r"^1: tfdist: rank 1: +File \".*blocking_pipeline\.py\", line \d+, in read",
                     first, re.M), job.describe()
    assert re.search(r"^0: .*resuming from \S+/ckpt-\d+ \(epoch 1, step 0\)", second,
                     re.M), job.describe()
    assert "tfdist job: finished: every task exited 0" in second, job.describe()
    assert "stalled" not in second, job.describe()
