"""`tfdist launch` with plain shell commands: ranks, prefixes, failure and Ctrl-C handling."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import (TFDIST, assert_nothing_left, free_port_base, job_processes,
                           requires_horovod, start, wait_for)

# The launcher, its ranks and its clean-up are tfdist's own (no TensorFlow in it).
pytestmark = pytest.mark.default_stack


def launch(*args, **kwargs):
    return subprocess.run([TFDIST, "launch", *args],
                          capture_output=True,
                          text=True,
                          timeout=300,
                          **kwargs)


def test_each_process_gets_its_rank_and_lines_are_prefixed():
    r = launch(
        "-n", "3", "--", sys.executable, "-c", "import os; print(os.environ['TFDIST_LAUNCH_RANK'], "
        "os.environ['TFDIST_LAUNCH_WORLD_SIZE'], os.environ['TFDIST_LAUNCH_PORT'])")
    assert r.returncode == 0, r.stderr
    lines = sorted(r.stdout.splitlines())
    ports = {line.split()[3] for line in lines}
    assert [line.split()[:3] for line in lines] == [["[0]", "0", "3"], ["[1]", "1", "3"],
                                                    ["[2]", "2", "3"]]
    assert len(ports) == 1 and 20000 <= int(ports.pop()) < 32000


def test_children_see_their_cluster_through_tfdist_env():
    r = launch("-n",
               "2",
               "--port=25100",
               "--",
               TFDIST,
               "env",
               "--strategy=multi_worker",
               "--nocheck_port",
               env=dict(os.environ, PATH=os.path.dirname(TFDIST)))
    assert r.returncode == 0, r.stderr
    by_rank = {}
    for line in r.stdout.splitlines():
        by_rank.setdefault(line[:3], []).append(line[4:])
    infos = {k: json.loads("\n".join(v)) for k, v in by_rank.items()}
    assert infos["[1]"]["tf_config"] == {
        "cluster": {
            "worker": ["localhost:25100", "localhost:25101"]
        },
        "task": {
            "type": "worker",
            "index": 1
        }
    }


def test_one_failure_stops_the_others_and_is_the_exit_status():
    # The others would sleep an hour: ending within minutes means they were stopped.
    start = time.monotonic()
    r = launch("-n", "3", "--grace=5", "--", "bash", "-c",
               'if [ "$TFDIST_LAUNCH_RANK" = 2 ]; then exit 7; fi; sleep 3600')
    assert r.returncode == 7
    assert "rank 2 exited with status 7; stopping the other 2 process(es)" in r.stderr
    assert_nothing_left()
    # Not a speed: the others get SIGTERM at once (sleep ends on it); 60 s is many times that
    # and far below launch()'s timeout, so a launcher that waited for them would fail here.
    took = time.monotonic() - start
    assert took < 60, took


def test_what_a_rank_leaves_in_its_group_is_stopped_after_grace():
    # The rank ends at once, leaving a child that ignores SIGTERM: SIGKILL after --grace.
    r = launch("-n", "2", "--grace=1", "--", "bash", "-c",
               "(trap '' TERM; exec sleep 600) & echo started")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("started") == 2
    assert_nothing_left()


def test_a_rank_whose_guard_died_gets_sigterm_in_its_group(tmp_path):
    # The guard killed under its rank: launch sends SIGTERM to the group it led (launch's
    # backstop for what a guard could not stop), while the guard is unreaped (its pid then names
    # no other group).
    mark = tmp_path / "got-term"
    r = launch("-n", "1", "--grace=5", "--", "bash", "-c",
               f"trap 'touch {mark}; exit 3' TERM; kill -KILL $PPID; sleep 600 & wait")
    assert r.returncode == 128 + signal.SIGKILL, r.stderr
    assert "rank 0 was killed by SIGKILL" in r.stderr
    deadline = time.monotonic() + 30
    while not mark.exists():  # the trap ran: the rank got SIGTERM
        assert time.monotonic() < deadline, job_processes()
        time.sleep(0.05)
    assert_nothing_left()


CHILD = """
import signal, sys, time
def bye(signum, frame):
    print("got-int", flush=True)
    sys.exit(130)
signal.signal(signal.SIGINT, bye)
print("up", flush=True)
time.sleep(60)
"""


def test_ctrl_c_ends_every_process():
    proc = subprocess.Popen([TFDIST, "launch", "-n", "2", "--", sys.executable, "-c", CHILD],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            text=True)
    seen = [proc.stdout.readline(), proc.stdout.readline()]
    assert sorted(seen) == ["[0] up\n", "[1] up\n"]
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert sorted(out.split()) == ["[0]", "[1]", "got-int", "got-int"]


def test_no_command_is_a_usage_error():
    r = launch("-n", "2")
    assert r.returncode == 2 and "no command given" in r.stderr


def kill_launcher_and_wait(cmd, marker, ports, n=2):
    """Start `tfdist launch -n n --port=ports[0] -- cmd`, SIGKILL it once `marker` was printed,
    and return the seconds until none of its processes and ports were left."""
    proc = start([TFDIST, "launch", "-n", str(n), f"--port={ports[0]}", "--", *cmd])
    try:
        wait_for(proc, marker)
        ranks = job_processes()
        assert len(ranks) > 1, ranks  # the launcher and what it started
        proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        proc.wait(timeout=60)
        assert_nothing_left(ports)
        return time.monotonic() - killed
    finally:
        proc.kill()
        proc.communicate()


SLEEPERS = """
import os, subprocess, sys, time
subprocess.Popen(["sleep", "600"])  # a child of the rank: it must go too
print("up", os.getpid(), flush=True)
time.sleep(600)
"""


def test_a_killed_launcher_takes_its_ranks_and_their_children():
    seconds = kill_launcher_and_wait([sys.executable, "-c", SLEEPERS], "up", [free_port_base(2)])
    print(f"launcher SIGKILL to nothing left: {seconds:.1f} s")


@pytest.mark.slow
@pytest.mark.parametrize(
    "strategy", ["multi_worker", pytest.param("horovod", marks=requires_horovod)])
def test_a_launcher_killed_mid_training_leaves_no_rank_and_no_port(strategy, tmp_path):
    base = free_port_base(2)
    # Killed once the first epoch ended (2 steps: the ranks have met and train; more steps would
    # only delay the kill), with the next ones under way.
    seconds = kill_launcher_and_wait([
        TFDIST, "train", f"--strategy={strategy}", "--pipeline=digits", "--epochs=100000",
        "--steps_per_epoch=2", "--batch_size=8", "--notensorboard",
        f"--model_dir={tmp_path / 'run'}"
    ], "epoch 1/100000: ", [base, base + 1])
    print(f"{strategy}: launcher SIGKILL to nothing left: {seconds:.1f} s")
