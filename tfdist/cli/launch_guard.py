"""The guard of one rank of `tfdist launch`: the rank's process group ends with the launcher.

`tfdist launch` starts every rank as `python -m tfdist.cli.launch_guard FD GRACE -- COMMAND...`
in a session of its own. The guard leads that session's process group, runs COMMAND in it and
relays its output, and holds FD, the read end of a pipe whose only writer is the launcher. The
kernel closes that writer however the launcher ends (SIGKILL and the out-of-memory killer
included), so EOF on FD means "the launcher is gone": the guard then sends SIGTERM to its group
(the rank and every child it started: the rank checkpoints as when preempted) and SIGKILL after
GRACE seconds. A pipe rather than Linux's parent-death signal: no race with a launcher that died
before the guard started (EOF is already there), it reaches the rank's own children through the
group, and it works wherever there are pipes.

The launcher's signals reach the group (the rank and its children) directly; the guard ignores
them and stays until the rank ends. It then stops what the rank left in its group, and exits
with the rank's status (a rank killed by a signal: the guard kills itself with the same signal).
Output goes through the guard so that, with the launcher gone, a rank that still writes its last
lines does not fail on a broken pipe while it saves its checkpoint.

Standard library only: it starts before every rank, so it must start fast. Python runs
tfdist/__init__.py first, which leaves this process as it found it (no import hook, no log
handler, the environment its rank inherits unchanged: tfdist.import_context).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time

from tfdist.process_groups import group_members

# Signals the launcher forwards to the group, or a terminal sends: meant for the rank.
_PASSED_BY = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP)


def _ignore(signum, frame) -> None:
    """A Python handler, not SIG_IGN: exec resets it, so COMMAND gets the default actions."""


def _group_members() -> list[int] | None:
    """The other processes in the guard's process group; None where unknown."""
    return group_members(os.getpgrp(), exclude=(os.getpid(), ))


def _stop_group(grace: float) -> None:
    """SIGTERM to the group, then SIGKILL to whatever of it is left after `grace` seconds."""
    os.killpg(os.getpgrp(), signal.SIGTERM)  # the guard's own handler ignores it
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _group_members():  # unknown (None): no wait
        time.sleep(0.1)
    for pid in _group_members() or ():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _watch_launcher(fd: int, grace: float) -> None:
    """Blocks until the launcher is gone, then ends the group (the guard with it)."""
    try:
        while os.read(fd, 64):
            pass
    except OSError:
        pass
    _stop_group(grace)
    os.killpg(os.getpgrp(), signal.SIGKILL)  # the guard too: nobody waits for its status


def _relay(source: int) -> None:
    """Copy the rank's output to the launcher; once that fails (launcher gone), drain it."""
    out = sys.stdout.fileno()
    while True:
        try:
            chunk = os.read(source, 65536)
        except OSError:
            return
        if not chunk:
            return
        if out is not None:
            try:
                os.write(out, chunk)
            except OSError:  # broken pipe: keep reading so the rank never sees one
                out = None


def _exit_like(status: int) -> None:
    if status < 0:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the rank's core dump, if any, is enough
        if -status in _PASSED_BY:  # handled above; SIGKILL's and SIGSTOP's cannot be changed
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        time.sleep(1)  # a signal whose default is to be ignored: fall through
    sys.exit(128 - status if status < 0 else status)


def main(argv: list[str]) -> None:
    if len(argv) < 5 or argv[3] != "--":
        sys.exit("usage: python -m tfdist.cli.launch_guard FD GRACE -- COMMAND [ARGS...]")
    fd, grace, command = int(argv[1]), float(argv[2]), argv[4:]
    for signum in _PASSED_BY:
        signal.signal(signum, _ignore)
    read, write = os.pipe()
    try:
        child = subprocess.Popen(command, stdout=write, stderr=write)
    except OSError as e:
        sys.stdout.write(f"tfdist launch: cannot run {command[0]!r}: {e}\n")
        sys.exit(127)
    os.close(write)
    threading.Thread(target=_watch_launcher, args=(fd, grace), daemon=True).start()
    relay = threading.Thread(target=_relay, args=(read, ), daemon=True)
    relay.start()
    status = child.wait()
    if _group_members() != []:  # what the rank left behind in its group
        _stop_group(grace)
    relay.join(timeout=5)  # the rank's last lines (a process outside the group may hold the pipe)
    sys.stdout.flush()
    _exit_like(status)


if __name__ == "__main__":
    main(sys.argv)
