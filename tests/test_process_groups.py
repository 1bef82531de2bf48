"""tfdist.process_groups on real process groups (no TensorFlow, no Keras): a stopped group ends
by SIGTERM once continued, without waiting out the grace; a group that ignores SIGTERM is killed
after it."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tfdist.process_groups import end_groups, group_members

pytestmark = pytest.mark.default_stack

# Leads its group and starts a child in it; with "ignore", both ignore SIGTERM.
TREE = ("import signal, subprocess, sys, time\n"
        "if sys.argv[1:] == ['ignore']:\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "subprocess.Popen([sys.executable, '-c', 'import signal, sys, time\\n'\n"
        "                  'if sys.argv[1:] == [\"ignore\"]: signal.signal(signal.SIGTERM, '\n"
        "                  'signal.SIG_IGN)\\n'\n"
        "                  'print(\"up\", flush=True)\\ntime.sleep(600)'] + sys.argv[1:])\n"
        "time.sleep(600)\n")


def start_group(*args):
    proc = subprocess.Popen([sys.executable, "-c", TREE, *args],
                            stdout=subprocess.PIPE,
                            text=True,
                            start_new_session=True)
    assert proc.stdout.readline() == "up\n"  # the child runs: the group has two processes
    assert len(group_members(proc.pid)) == 2
    return proc


def test_a_stopped_group_ends_by_sigterm_within_the_grace():
    proc = start_group()
    try:
        # os.killpg, not the kill command: procps-ng 4.0.2's `kill -STOP -PGID` (no "--") sends
        # to pid -1, every process on the machine.
        os.killpg(proc.pid, signal.SIGSTOP)
        started = time.monotonic()
        end_groups([proc.pid], grace=60)
        assert time.monotonic() - started < 30  # SIGTERM acted: the grace was not waited out
        assert proc.wait(timeout=10) == -15
        assert group_members(proc.pid) == []
    finally:
        proc.kill()


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace():
    proc = start_group("ignore")
    try:
        started = time.monotonic()
        end_groups([proc.pid], grace=1.5)
        assert time.monotonic() - started >= 1.5
        assert proc.wait(timeout=10) == -9
        deadline = time.monotonic() + 10
        while group_members(proc.pid) and time.monotonic() < deadline:  # the child: reaped by init
            time.sleep(0.05)
        assert group_members(proc.pid) == []
    finally:
        proc.kill()
