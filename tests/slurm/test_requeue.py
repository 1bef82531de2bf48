"""Requeue on the test cluster comes back fast: the cluster sets AuthInfo cred_expire (default
10 s) instead of Slurm's 120 s, which held a requeued job ~170 s (measured). Later tests of
checkpoint-and-requeue depend on this."""

from __future__ import annotations

import time

import pytest

from tests.helpers import timeout_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

SCRIPT = """\
echo "run restart=${SLURM_RESTART_COUNT:-0} node=$SLURMD_NODENAME"
if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then
    touch started
    sleep 300
fi
echo "finished restart=${SLURM_RESTART_COUNT:-0}"
"""

# Its waits in turn: the first run started (queueing included), the requeue seen (asserted under
# 60 s), the second run's end (it only echoes).
STARTED, REQUEUED, FINISHED = 240, 120, 120


@timeout_for(STARTED, REQUEUED, FINISHED)
def test_scontrol_requeue_is_held_only_seconds(slurm, jobdir):
    job_id = slurm.submit(SCRIPT,
                          "--requeue",
                          "--open-mode=append",
                          "--nodes=1",
                          "--ntasks=1",
                          workdir=jobdir)
    deadline = time.monotonic() + STARTED
    while not (jobdir / "started").exists():
        assert time.monotonic() < deadline, slurm.job_info(job_id)
        time.sleep(0.2)
    t0 = time.monotonic()
    slurm.cmd("scontrol", "requeue", job_id)
    # Held (Reason=BeginTime) for about cred_expire seconds; after that it may still wait for
    # free nodes when another session's jobs use them, which is not what this test measures.
    held = None
    while held is None and time.monotonic() - t0 < REQUEUED:
        info = slurm.job_info(job_id)
        if info.get("Restarts") == "1" and info.get("Reason") != "BeginTime" and not (
                info.get("JobState") in ("COMPLETING", "REQUEUED")):
            held = time.monotonic() - t0
        time.sleep(0.2)
    job = slurm.wait(job_id, jobdir, timeout=FINISHED)
    print(f"requeued job {job_id} was held {held} s after scontrol requeue")
    assert held is not None and held < 60, f"held {held} s\n{job.describe()}"
    assert job.state == "COMPLETED", job.describe()
    assert job.info["Restarts"] == "1"
    log = job.log
    assert "run restart=0" in log and "run restart=1" in log, job.describe()
    assert "finished restart=1" in log and "finished restart=0" not in log, job.describe()
