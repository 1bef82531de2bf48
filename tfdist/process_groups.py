"""Ending process groups: SIGCONT, then SIGTERM, then SIGKILL to what is left after a grace.

The way `tfdist launch` ends its ranks (each rank's group: its guard, the rank, its children;
bench/proctree.py ends a measured run the same way, by its run's tag). SIGCONT first: a stopped
process (Ctrl-Z, a debugger, bench/'s alternating slices) keeps a SIGTERM pending until it is
continued, and would otherwise wait out the grace to be killed.

Only groups the caller created and whose leader it has not reaped (alive or a zombie): their
number then names no other group. A reaped leader's pid is free for any new process, which may
lead a group of its own (every `start_new_session` child does), and pids come round again
within minutes on a busy machine (pid_max 32768).

Standard library only, Linux /proc to see who is left: `tfdist launch`'s guards import it before
every rank starts.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Callable, Iterable, Optional


def signal_group(group: int, signum: int) -> None:
    """Send `signum` to process group `group`; a group already gone is no error."""
    if group <= 1:  # 0 is the caller's own group; killpg(1) would be init's
        raise ValueError(f"not a process group to signal: {group}")
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        pass


def group_members(group: int, exclude: Iterable[int] = ()) -> Optional[list[int]]:
    """The live (not zombie) processes of process group `group`, less `exclude`; None where
    unknown (no /proc)."""
    exclude, found = set(exclude), []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(b")") + 2:].split()  # after "pid (comm) ": state ppid pgrp
        if pid not in exclude and fields[0] != b"Z" and int(fields[2]) == group:
            found.append(pid)
    return found


def end_groups(groups: Iterable[int],
               grace: float,
               ended: Optional[Callable[[int], bool]] = None) -> None:
    """SIGCONT, then SIGTERM to every group; SIGKILL to each group not ended `grace` seconds
    later. `ended(group)` says whether a group is done (default: no live process left in it;
    where that is unknown, the whole grace is given). The groups: see the module's docstring."""
    groups = list(dict.fromkeys(groups))
    if ended is None:
        ended = lambda group: group_members(group) == []  # noqa: E731
    for signum in (signal.SIGCONT, signal.SIGTERM):
        for group in groups:
            signal_group(group, signum)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not all(ended(g) for g in groups):
        time.sleep(0.1)
    for group in groups:
        if not ended(group):
            signal_group(group, signal.SIGKILL)
