"""A measured run as a tree of processes: find them, stop and continue them together, read the CPU
time and memory they used. Linux /proc only; imports no TensorFlow.

A run's tree is every process descended from its roots (the processes the driver started): the
launcher, its guards, horovodrun, every rank, the parameter servers, however they were started
(sessions do not matter, parents do).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Iterable

TICKS = os.sysconf("SC_CLK_TCK")


def _stats() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent pid, state, user + system ticks with the reaped children's)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        # After the command's ")": state ppid ... utime(11) stime cutime cstime
        fields = stat[stat.rindex(b")") + 2:].split()
        out[int(name)] = (int(fields[1]), fields[0].decode(), sum(int(x) for x in fields[11:15]))
    return out


def members(roots: Iterable[int]) -> dict[int, tuple[str, int]]:
    """pid -> (state, ticks) of every live process of the tree, the roots included."""
    roots = set(roots)
    stats = _stats()
    out = {}
    for pid, (_, state, ticks) in stats.items():
        p, depth = pid, 0
        while p and p not in roots and depth < 64:
            p, depth = stats[p][0] if p in stats else 0, depth + 1
        if p in roots and state not in ("Z", "X"):
            out[pid] = (state, ticks)
    return out


def cpu_seconds(roots: Iterable[int]) -> tuple[float, int]:
    """User + system seconds of the tree's live processes (and of the children they reaped), and
    how many processes that is."""
    found = members(roots)
    return sum(t for _, t in found.values()) / TICKS, len(found)


def send(roots: Iterable[int], sig: int) -> list[int]:
    """Send sig to every process of the tree; returns their pids."""
    pids = list(members(roots))
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return pids


def stop(roots: Iterable[int], timeout: float = 5.0) -> bool:
    """SIGSTOP the whole tree and wait until every process is stopped (state T), so the CPU time
    read next is final. False if one still ran after `timeout` seconds."""
    roots = list(roots)
    send(roots, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while True:
        running = [pid for pid, (state, _) in members(roots).items() if state not in ("T", "t")]
        if not running:
            return True
        if time.monotonic() > deadline:
            return False
        for pid in running:  # started since the last signal
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        time.sleep(0.001)


def resume(roots: Iterable[int]) -> None:
    send(roots, signal.SIGCONT)


def kill(roots: Iterable[int]) -> None:
    """SIGKILL every process of the tree (stopped ones too)."""
    send(roots, signal.SIGKILL)


def groups(roots: Iterable[int]) -> set[int]:
    """The process groups of the tree's live processes (a launcher's ranks and horovodrun's
    children run in groups of their own)."""
    out = set()
    for pid in members(roots):
        try:
            out.add(os.getpgid(pid))
        except ProcessLookupError:
            pass
    return out


def peak_rss_mb(roots: Iterable[int], at_least: float = 100.0) -> list[float]:
    """The peak resident memory (VmHWM, MB) of the tree's processes that reached `at_least` MB
    (the ranks and servers, not the small launchers and guards), largest first."""
    out = []
    for pid in members(roots):
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
