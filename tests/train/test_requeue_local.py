"""Preemption and requeue without root or Slurm: SIGUSR1 to a local 2-process run checkpoints
and exits 75; `--requeue` calls a fake `scontrol` on PATH once, from rank 0, with the job id, and
a failing one is reported."""

import json
import os
import re
import signal
import subprocess

import pytest

from tests.helpers import TFDIST, assert_nothing_left, finish, free_port_base, wait_for
from tfdist.train.preemption import PAUSE_AFTER_STEP
from tfdist.train.restarts import RERUN

pytestmark = [pytest.mark.slow, pytest.mark.default_stack]  # tfdist's exit codes and restarts

JOB_ID = "4242"
# Records its rank and arguments; fails like a job submitted without --requeue when told to.
FAKE_SCONTROL = """#!/bin/sh
echo "rank=$TFDIST_LAUNCH_RANK $*" >> "$FAKE_SCONTROL_LOG"
if [ -n "$FAKE_SCONTROL_FAIL" ]; then
    echo "slurm_requeue error: Requested operation is presently disabled for job $2" >&2
    exit 1
fi
"""


def preempt_with_usr1(tmp_path, *extra, **env):
    """A 2-worker run under `tfdist launch`, SIGUSR1 while both wait after step 5 (the test
    hook): the signal comes while training runs on any machine; (status, output)."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "scontrol.log"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(FAKE_SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    environ = {
        k: v
        for k, v in os.environ.items() if not k.startswith(("SLURM", "TFDIST_LAUNCH", "HOROVOD"))
    }
    environ.update(PATH=f"{bin_dir}:{os.environ['PATH']}",
                   FAKE_SCONTROL_LOG=str(calls),
                   SLURM_JOB_ID=JOB_ID,
                   **{PAUSE_AFTER_STEP: "5"},
                   **env)
    port = free_port_base(2)
    cmd = [
        TFDIST, "launch", "-n", "2", f"--port={port}", "--", TFDIST, "train",
        "--strategy=multi_worker", "--pipeline=digits", "--epochs=3", "--batch_size=8",
        "--notensorboard", f"--model_dir={tmp_path / 'run'}", *extra
    ]
    proc = subprocess.Popen(cmd,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT,
                            text=True,
                            env=environ)
    head = wait_for(proc, f"{PAUSE_AFTER_STEP}=5: paused")
    proc.send_signal(signal.SIGUSR1)
    status, out = finish(proc)
    assert_nothing_left([port, port + 1])
    return status, head + out, calls.read_text().splitlines() if calls.exists() else []


def checkpoint_of(out, tmp_path):
    """rank 0's 'preempted ...; checkpoint: PATH. ' words, PATH checked to be a whole checkpoint
    of the step the message names."""
    m = re.search(
        r"\[0\] tfdist: warning: preempted (?:at step (\d+) of epoch (\d+)|after epoch (\d+)); "
        r"checkpoint: (\S+) \(epoch (\d+), step (\d+)\)\. ", out)
    assert m, out[-3000:]
    path = m.group(4)
    assert path.startswith(str(tmp_path / "run" / "checkpoints" / "ckpt-")), path
    meta = json.loads(open(os.path.join(path, "meta.json")).read())
    where = (int(m.group(2)) - 1, int(m.group(1))) if m.group(1) else (int(m.group(3)), 0)
    # the words, the position in parentheses (as the resume line writes it) and the checkpoint's
    assert (meta["epoch"], meta["step"]) == where == (int(m.group(5)), int(m.group(6))), meta
    return m.group(0)


@pytest.mark.parametrize("keras", [2, 3])
def test_usr1_checkpoints_and_exits_75_without_requeue(keras, tmp_path):
    status, out, calls = preempt_with_usr1(tmp_path, f"--keras={keras}")
    assert status == 75, out[-3000:]
    assert "received SIGUSR1" in out
    checkpoint_of(out, tmp_path)
    assert RERUN == ("Re-run the same command with the same run directory (--model_dir or "
                     "MODEL_DIR) to resume.")
    assert RERUN in out
    assert calls == []  # no --requeue: scontrol is never called


def test_requeue_calls_scontrol_once_from_rank_0_with_the_job_id(tmp_path):
    status, out, calls = preempt_with_usr1(tmp_path, "--requeue")
    assert status == 75, out[-3000:]
    # Rank 0 asks whether the job was cancelled (scancel: never requeue), then requeues.
    assert calls == [f"rank=0 show job -o {JOB_ID}", f"rank=0 requeue {JOB_ID}"]
    assert f"requeued Slurm job {JOB_ID}" in out
    line = out[out.index(checkpoint_of(out, tmp_path)):].splitlines()[0]
    assert line.endswith("The job was requeued and resumes from it."), line


def test_a_failing_scontrol_is_reported(tmp_path):
    status, out, calls = preempt_with_usr1(tmp_path, "--requeue", FAKE_SCONTROL_FAIL="1")
    assert status == 75, out[-3000:]  # still resumable by hand
    # Rank 0 asks whether the job was cancelled (scancel: never requeue), then requeues.
    assert calls == [f"rank=0 show job -o {JOB_ID}", f"rank=0 requeue {JOB_ID}"]
    line = out[out.index(checkpoint_of(out, tmp_path)):].splitlines()[0]
    assert (f"`scontrol requeue {JOB_ID}` failed with status 1: slurm_requeue error: Requested "
            f"operation is presently disabled for job {JOB_ID}." in line), line
    assert line.endswith(RERUN), line
    assert "requeued Slurm job" not in out
