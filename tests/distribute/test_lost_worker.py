"""A worker killed mid-training ends the job: the survivor fails fast and names the lost task."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import (assert_nothing_left, clean_environ, free_port_base, launch,
                           requires_horovod)
from tfdist.cluster.local import launch_environ

HERE = Path(__file__).parent

# How soon a lost worker ends the job is tested: no other test beside them (tools/run_tests.py).
pytestmark = [pytest.mark.slow, pytest.mark.alone]
SCRIPT = str(HERE / "long_train_script.py")


def start(rank, strategy, port, log):
    env = clean_environ(**launch_environ(rank, 2, port), PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, SCRIPT, strategy],
                            env=env,
                            stdout=log,
                            stderr=subprocess.STDOUT)


def kill_rank1_and_wait(strategy, tmp_path):
    logs = [open(tmp_path / f"rank{r}.log", "w+") for r in range(2)]
    port = free_port_base(2)
    procs = [start(r, strategy, port, logs[r]) for r in range(2)]
    try:
        deadline = time.monotonic() + 240
        while "TRAINING" not in (tmp_path / "rank1.log").read_text():
            assert time.monotonic() < deadline and procs[1].poll() is None, "never trained"
            time.sleep(0.5)
        procs[1].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        status = procs[0].wait(timeout=60)  # raises if the survivor hangs
        assert_nothing_left([port, port + 1])  # before the clean-up below could hide a straggler
        return status, time.monotonic() - killed, (tmp_path / "rank0.log").read_text()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


# Not a speed: the survivor would otherwise train "forever"; it notices through TensorFlow's
# heartbeat (about 10 s) or gloo's closed connection, and 60 s is several times that.


def test_multi_worker_survivor_names_the_lost_worker(tmp_path):
    status, seconds, log = kill_rank1_and_wait("multi_worker", tmp_path)
    assert status != 0 and seconds < 60
    assert "tfdist: Lost worker 1 (rank 1, localhost:" in log


@requires_horovod
def test_horovod_survivor_says_which_rank_stopped(tmp_path):
    status, seconds, log = kill_rank1_and_wait("horovod", tmp_path)
    assert status != 0 and seconds < 60
    assert "tfdist: Horovod shut down while rank 0 of 2 was training: rank 1 stopped" in log


@pytest.mark.parametrize(
    "strategy", ["multi_worker", pytest.param("horovod", marks=requires_horovod)])
def test_launch_returns_non_zero_and_names_the_dead_rank(strategy):
    start = time.monotonic()
    r = launch(2, sys.executable, SCRIPT, strategy, "20", timeout=300)
    assert r.returncode != 0
    assert "tfdist launch: rank 1 was killed by SIGKILL" in r.stderr
    assert_nothing_left()
    assert time.monotonic() - start < 240  # rank 0 alone would train "forever"
