"""tfdist.cluster.requeue: `scontrol requeue` of this job, through a fake `scontrol` on PATH that
records its arguments (the real one: tests/slurm/test_requeue.py and test_jobs.py)."""

import logging
import subprocess
import sys

import pytest

from tfdist.cluster.requeue import RequeueFailed, job_spec, requeue

FAKE_SCONTROL = """#!/bin/sh
echo "$*" >> "$FAKE_SCONTROL_LOG"
case "$1" in
show) echo "JobId=$4 JobName=x JobState=${FAKE_STATE:-RUNNING} Reason=${FAKE_REASON:-None}" ;;
requeue)
    if [ -n "$FAKE_SCONTROL_FAIL" ]; then
        echo "slurm_requeue error: Requested operation is presently disabled for job $2" >&2
        exit 1
    fi ;;
esac
"""


@pytest.fixture
def scontrol(tmp_path, monkeypatch):
    """The fake scontrol first on PATH; returns the calls it has seen so far."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "scontrol.log"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(FAKE_SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_SCONTROL_LOG", str(calls))
    return lambda: calls.read_text().splitlines() if calls.exists() else []


def test_an_array_element_is_named_as_array_task():
    assert job_spec({
        "SLURM_JOB_ID": "4243",
        "SLURM_ARRAY_JOB_ID": "4200",
        "SLURM_ARRAY_TASK_ID": "3"
    }) == "4200_3"
    assert job_spec({"SLURM_JOB_ID": "4243"}) == "4243"
    assert job_spec({"SLURM_JOBID": "4243"}) == "4243"


def test_the_job_is_requeued_after_asking_whether_it_was_cancelled(scontrol, caplog):
    with caplog.at_level(logging.WARNING, logger="tfdist"):
        assert requeue({"SLURM_JOB_ID": "4242"}) is True
    assert scontrol() == ["show job -o 4242", "requeue 4242"]
    assert "requeued Slurm job 4242" in caplog.text


def test_an_array_element_requeues_itself_not_the_array(scontrol):
    environ = {"SLURM_JOB_ID": "4243", "SLURM_ARRAY_JOB_ID": "4200", "SLURM_ARRAY_TASK_ID": "3"}
    assert requeue(environ) is True
    assert scontrol() == ["show job -o 4200_3", "requeue 4200_3"]


@pytest.mark.parametrize("state,reason", [("COMPLETING", "None"), ("CANCELLED", "None")])
def test_a_cancelled_job_is_not_requeued(scontrol, monkeypatch, caplog, state, reason):
    monkeypatch.setenv("FAKE_STATE", state)
    monkeypatch.setenv("FAKE_REASON", reason)
    with caplog.at_level(logging.WARNING, logger="tfdist"):
        assert requeue({"SLURM_JOB_ID": "4242"}) is False
    assert scontrol() == ["show job -o 4242"]
    assert "not requeued: Slurm job 4242 was cancelled (scancel)" in caplog.text


def test_a_job_at_its_time_limit_is_requeued(scontrol, monkeypatch):
    monkeypatch.setenv("FAKE_STATE", "COMPLETING")
    monkeypatch.setenv("FAKE_REASON", "TimeLimit")
    assert requeue({"SLURM_JOB_ID": "4242"}) is True


def test_outside_a_slurm_job_nothing_is_called(scontrol, caplog):
    with caplog.at_level(logging.WARNING, logger="tfdist"):
        assert requeue({}) is False
    assert scontrol() == []
    assert "not requeued: this process runs in no Slurm job" in caplog.text


def test_a_failing_scontrol_raises_with_its_words(scontrol, monkeypatch):
    monkeypatch.setenv("FAKE_SCONTROL_FAIL", "1")
    with pytest.raises(RequeueFailed) as e:
        requeue({"SLURM_JOB_ID": "4242"})
    assert str(e.value) == (
        "`scontrol requeue 4242` failed with status 1: slurm_requeue error: Requested operation "
        "is presently disabled for job 4242. Submit with `#SBATCH --requeue`, or re-submit the "
        "job yourself")


def test_no_scontrol_raises(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RequeueFailed, match=r"`scontrol requeue 4242` could not run"):
        requeue({"SLURM_JOB_ID": "4242"})


def test_imports_no_tensorflow():
    code = ("import sys, tfdist.cluster.requeue\n"
            "assert 'tensorflow' not in sys.modules, 'tfdist.cluster.requeue imported TensorFlow'")
    subprocess.run([sys.executable, "-c", code], check=True)
