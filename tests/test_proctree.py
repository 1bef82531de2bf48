"""bench/proctree.py on real sleeping processes (no TensorFlow): a run's processes are those that
carry its tag, wherever they were re-parented, and only they are counted, stopped, continued and
ended; a process of the run's tree without the tag (another run's, another session's that took a
reaped pid) is left alone."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
import proctree  # noqa: E402

sys.path.remove(str(BENCH))

pytestmark = pytest.mark.default_stack

# The run's root: a tagged child; a child carrying another tag (a process in the run's tree that
# is not the run's); and a tagged grandchild whose parent exits at once, re-parented away from
# the root. Prints the three pids, then sleeps.
ROOT = textwrap.dedent("""
    import os, subprocess, sys, time
    sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
    child = subprocess.Popen(sleep)
    other = subprocess.Popen(sleep, env=dict(os.environ, BENCH_RUN_TAG=sys.argv[1]))
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys\\n"
                               "print(subprocess.Popen(sys.argv[1:]).pid, flush=True)"] + sleep,
                              stdout=subprocess.PIPE, text=True)
    orphan = int(parent.stdout.readline())
    parent.wait()
    print(child.pid, other.pid, orphan, flush=True)
    time.sleep(600)
""")


def state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    return stat[stat.rindex(b")") + 2:].split()[0].decode()


def parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    return int(stat[stat.rindex(b")") + 2:].split()[1])


def test_only_the_tagged_processes_are_the_run():
    tag, other_tag = proctree.new_tag(), proctree.new_tag()
    root = subprocess.Popen([sys.executable, "-c", ROOT, other_tag],
                            env=dict(os.environ, **{proctree.TAG: tag}),
                            stdout=subprocess.PIPE,
                            text=True,
                            start_new_session=True)
    try:
        child, other, orphan = map(int, root.stdout.readline().split())
        assert parent(orphan) != root.pid  # re-parented: no walk up the parents finds it
        run = {root.pid, child, orphan}
        assert set(proctree.members(tag)) == run
        assert set(proctree.members(other_tag)) == {other}
        assert set(proctree.members([tag, other_tag])) == run | {other}

        assert proctree.stop(tag)
        assert {state(pid) for pid in run} <= {"T", "t"}
        assert state(other) not in ("T", "t")
        cpu, processes = proctree.cpu_seconds(tag)
        assert processes == 3 and cpu > 0
        time.sleep(0.2)
        assert proctree.cpu_seconds(tag) == (cpu, processes)  # stopped: nothing moves

        proctree.resume(tag)
        assert not {state(pid) for pid in run} & {"T", "t"}

        assert proctree.stop(tag)  # ended while stopped: continued, then SIGTERM ends it
        started = time.monotonic()
        proctree.end(tag, grace=60)
        assert time.monotonic() - started < 30
        assert root.wait(timeout=10) == -signal.SIGTERM
        assert proctree.members(tag) == {}
        assert set(proctree.members(other_tag)) == {other}  # alone: it had another tag
        assert state(other) not in ("T", "t")
    finally:
        proctree.kill([tag, other_tag])
        root.kill()
        root.wait()
    deadline = time.monotonic() + 10
    while proctree.members(other_tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proctree.members(other_tag) == {}


def test_a_signal_is_sent_only_to_a_process_that_carries_the_tag_then():
    """The check right before each signal: a pid listed as the run's whose process no longer
    carries the tag (a reused pid) gets nothing."""
    tag = proctree.new_tag()
    untagged = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        entries = proctree._entries(tag)
        assert not proctree._signal(untagged.pid, signal.SIGSTOP, entries)
        assert state(untagged.pid) not in ("T", "t")
        assert not proctree._signal(untagged.pid, signal.SIGKILL, entries)
        assert untagged.poll() is None
    finally:
        untagged.kill()
        untagged.wait()


def test_a_driver_started_by_a_driver_tags_its_runs_with_both_tags():
    """bench/run_all.py's tag reaches the runs of the training.py it started: ending its own
    runs, it ends theirs."""
    outer, inner = proctree.new_tag(), proctree.new_tag()
    env = proctree.tagged_environ(proctree.tagged_environ(dict(os.environ), outer), inner)
    assert env[proctree.TAG] == f"{outer}:{inner}"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=env)
    try:
        deadline = time.monotonic() + 10
        while proc.pid not in proctree.members(inner) and time.monotonic() < deadline:
            time.sleep(0.01)  # exec'd with the tags
        assert set(proctree.members(inner)) == set(proctree.members(outer)) == {proc.pid}
        assert proctree.members(proctree.new_tag()) == {}
        proctree.end(outer, grace=10)
        assert proc.wait(timeout=10) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()


def test_a_process_read_as_it_execs_is_found_afterwards(monkeypatch):
    """Popen returns once the child's exec has closed its close-on-exec pipe, before the kernel
    has set up the new environment: a read right then finds it empty (measured: 8 of 200 reads
    of /proc/PID/environ right after Popen, 2026-11-29). bench/common.py's start lists the run's
    processes right after each Popen, so a process may be read so first (here every one is: the
    first read of each gives what the kernel gave then); it must still be found, stopped and
    counted later (before, it never was: its run trained through the other side's slices)."""
    tag = proctree.new_tag()
    env = proctree.tagged_environ(dict(os.environ), tag)
    read, carried = set(), proctree._carried

    def as_at_exec(pid):
        if pid in read:
            return carried(pid)
        read.add(pid)
        return frozenset()

    monkeypatch.setattr(proctree, "_carried", as_at_exec)
    procs = []
    try:
        for _ in range(3):
            procs.append(subprocess.Popen(["sleep", "600"], env=env, start_new_session=True))
            assert procs[-1].pid not in proctree.members(tag)  # as bench/common.py start does
        assert set(proctree.members(tag)) == {p.pid for p in procs}
        assert proctree.stop(tag)
        assert {state(p.pid) for p in procs} <= {"T", "t"}
        assert proctree.cpu_seconds(tag)[1] == 3
    finally:
        for p in procs:
            p.kill()
            p.wait()
