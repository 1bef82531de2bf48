"""A measured run's processes: find them, stop and continue them together, end them, read the CPU
time and memory they used. Linux /proc only; imports no TensorFlow.

A run's processes are those whose environment holds its tag, `BENCH_RUN_TAG=<uuid>`: the driver
puts a fresh one in the environment of each process it starts (bench/common.py; after the tags
the driver itself carries, `BENCH_RUN_TAG=<uuid>:<uuid>`, when another driver started it), and
every process that one starts inherits it: the launcher, its guards, horovodrun, every rank, the
parameter servers, in whatever process group or session, re-parented or not. Not parent pids:
this machine's pids are reused within minutes (pid_max 32768, other sessions start processes
all the time), and a walk up to a reaped root's pid would take in whatever process has it now
(another session's, to be stopped or killed). /proc/PID/environ is a process's environment at its
exec, which no process of another run or session carries; it is checked again right before each
signal, through a pidfd opened first, so a pid reused between listing and signalling is never
signalled.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from typing import Iterable

TICKS = os.sysconf("SC_CLK_TCK")
TAG = "BENCH_RUN_TAG"  # no TFDIST_ prefix: tests/helpers.py's clean_environ keeps it


def new_tag() -> str:
    """A fresh run tag (the value of TAG)."""
    return uuid.uuid4().hex


def tagged_environ(env: dict, tag: str) -> dict:
    """`env` with `tag` added to the tags it carries (a driver started by another keeps that
    one's tag beside its own: its runs are the other driver's too, found when it ends them)."""
    return dict(env, **{TAG: ":".join(filter(None, (env.get(TAG), tag)))})


def _entries(tags: Iterable[str] | str) -> frozenset[bytes]:
    """The tags `tags` as they appear in an environment."""
    tags = [tags] if isinstance(tags, str) else list(tags)
    assert all(tags), tags  # an empty tag would match nothing useful
    return frozenset(tag.encode() for tag in tags)


def _stats() -> dict[int, tuple[str, int, int]]:
    """pid -> (state, user + system ticks with the reaped children's, start time) of every
    process but this one (the driver never carries its runs' tags, and never signals itself)."""
    out, me = {}, os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        # After the command's ")": state ppid ... utime(11) stime cutime cstime ... starttime(19)
        fields = stat[stat.rindex(b")") + 2:].split()
        out[int(name)] = (fields[0].decode(), sum(int(x) for x in fields[11:15]), int(fields[19]))
    return out


# (pid, start time) -> the tags it carries, kept once it carries one (tags are inherited, so a
# process keeps them at its own execs). One that carries none is read anew each time: Popen
# returns when the child's exec closes its close-on-exec pipe, before the kernel has set up the new
# environment, so a read right then finds it empty. Cached, such a process was never found again:
# never stopped, its CPU never counted, never killed (2026-11-29: a hand-written run trained
# through its twin's slices and the driver waited for it forever). A reused pid has another start
# time, so is read anew.
_seen: dict[tuple[int, int], frozenset[bytes]] = {}


def _own_start() -> int:
    with open("/proc/self/stat", "rb") as f:
        stat = f.read()
    return int(stat[stat.rindex(b")") + 2:].split()[19])


# A process that started before this one cannot carry a tag this one gave: never read.
_STARTED = _own_start()


def _carried(pid: int) -> frozenset[bytes]:
    """The tags process `pid` carries (none: gone, a zombie, another user's, untagged)."""
    prefix = f"{TAG}=".encode()
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        return frozenset()
    entry = next((e for e in environ.split(b"\0") if e.startswith(prefix)), b"")
    return frozenset(filter(None, entry[len(prefix):].split(b":")))


def _tagged(pid: int, entries: frozenset[bytes]) -> bool:
    """Whether process `pid` carries one of `entries` now."""
    return not _carried(pid).isdisjoint(entries)


def members(tags: Iterable[str] | str) -> dict[int, tuple[str, int]]:
    """pid -> (state, ticks) of every live (not zombie) process carrying one of `tags`."""
    entries, stats = _entries(tags), _stats()
    keys = {(pid, start) for pid, (_, _, start) in stats.items()}
    for key in set(_seen) - keys:  # ended processes
        del _seen[key]
    out = {}
    for pid, (state, ticks, start) in stats.items():
        if state in ("Z", "X") or start < _STARTED:  # a zombie's environment reads empty
            continue
        carried = _seen.get((pid, start)) or _carried(pid)
        if carried:
            _seen[(pid, start)] = carried
        if not carried.isdisjoint(entries):
            out[pid] = (state, ticks)
    return out


def _signal(pid: int, sig: int, entries: frozenset[bytes]) -> bool:
    """Send `sig` to `pid` if it carries one of `entries` now; whether it was sent. The pidfd is
    opened before the check: if the pid is reused after it, the signal goes to the process the
    pidfd holds (gone: nothing sent), never to the newcomer."""
    if pid <= 1:  # never kill(0) (this group), kill(-1) (every process) or init
        return False
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except OSError:  # no pidfds (kernel before 5.3): the check right before the kill
        fd = None
    try:
        if not _tagged(pid, entries):
            return False
        if fd is None:
            os.kill(pid, sig)
        else:
            signal.pidfd_send_signal(fd, sig)
        return True
    except ProcessLookupError:
        return False
    finally:
        if fd is not None:
            os.close(fd)


def cpu_seconds(tags: Iterable[str] | str) -> tuple[float, int]:
    """User + system seconds of the runs' live processes (and of the children they reaped), and
    how many processes that is."""
    found = members(tags)
    return sum(t for _, t in found.values()) / TICKS, len(found)


def send(tags: Iterable[str] | str, sig: int) -> list[int]:
    """Send sig to every process of the runs; returns the pids it was sent to."""
    entries = _entries(tags)
    return [pid for pid in members(tags) if _signal(pid, sig, entries)]


def stop(tags: Iterable[str] | str, timeout: float = 5.0) -> bool:
    """SIGSTOP every process of the runs and wait until each is stopped (state T), so the CPU
    time read next is final. False if one still ran after `timeout` seconds."""
    entries = _entries(tags)
    send(tags, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while True:
        running = [pid for pid, (state, _) in members(tags).items() if state not in ("T", "t")]
        if not running:
            return True
        if time.monotonic() > deadline:
            return False
        for pid in running:  # started since the last signal
            _signal(pid, signal.SIGSTOP, entries)
        time.sleep(0.001)


def resume(tags: Iterable[str] | str) -> None:
    send(tags, signal.SIGCONT)


def kill(tags: Iterable[str] | str) -> None:
    """SIGKILL every process of the runs (stopped ones too)."""
    send(tags, signal.SIGKILL)


def end(tags: Iterable[str] | str, grace: float) -> None:
    """End the runs as `tfdist launch` ends its ranks (tfdist.process_groups): SIGCONT (a
    stopped process keeps a SIGTERM pending until continued), SIGTERM, and SIGKILL to what is
    left after `grace` seconds; a process that appears meanwhile gets them too. Returns once
    none is left (or 10 s after the SIGKILL)."""
    entries, signalled = _entries(tags), set()
    deadline = time.monotonic() + grace
    while True:
        live = set(members(tags))
        if not live:
            return
        if time.monotonic() > deadline:
            break
        for sig in (signal.SIGCONT, signal.SIGTERM):
            for pid in live - signalled:
                _signal(pid, sig, entries)
        signalled |= live
        time.sleep(0.1)
    deadline = time.monotonic() + 10
    while (live := members(tags)) and time.monotonic() < deadline:
        for pid in live:
            _signal(pid, signal.SIGKILL, entries)
        time.sleep(0.05)


def peak_rss_mb(tags: Iterable[str] | str, at_least: float = 100.0) -> list[float]:
    """The peak resident memory (VmHWM, MB) of the runs' processes that reached `at_least` MB
    (the ranks and servers, not the small launchers and guards), largest first."""
    out = []
    for pid in members(tags):
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        mb = int(line.split()[1]) / 1024
                        if mb >= at_least:
                            out.append(round(mb, 1))
                        break
        except OSError:
            continue
    return sorted(out, reverse=True)
