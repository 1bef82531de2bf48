"""What an element's log says: how often it was requeued, and how an element that is no longer in
Slurm's queue ended (done elements are known by their metrics.json instead)."""

from __future__ import annotations

import re
from typing import Optional


def read(path: Optional[str]) -> str:
    """The log's text, "" when there is none (yet)."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except (OSError, TypeError):
        return ""


def requeues(log: str) -> int:
    """How often the element ran again: jobs/common.sh logs SLURM_RESTART_COUNT at each start."""
    return max([int(n) for n in re.findall(r"SLURM_RESTART_COUNT=(\d+)", log)] or [0])


def ended(log: str) -> tuple[str, str]:
    """How an element that is no longer in Slurm's queue ended, from its log."""
    if not log:
        return "failed", "no log (the job ended before its script ran?)"
    if "CANCELLED" in log and "DUE TO TIME LIMIT" not in log:
        return "cancelled", last_error(log)
    if re.search(r"tfdist job: preempted \(status 75\)", log):
        return "stopped", "preempted, resumable: resubmit it"
    status = re.findall(r"failed with status (\d+)", log)
    if "DUE TO TIME LIMIT" in log:
        return "failed", "time limit (not requeued): " + last_error(log)
    return "failed", (f"status {status[-1]}: " if status else "") + last_error(log)


def last_error(log: str) -> str:
    """What the failing task said last (its lines are labelled "N: " by srun: an exception's last
    line, a message before an exit), else the last line that reads like an error."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    said = [line for line in lines if re.match(r"^\d+: ", line)]
    if said:
        return said[-1][:200]
    for line in reversed(lines):
        if re.search(r"error|Error|Traceback|CANCELLED|Killed", line):
            return line[:200]
    return lines[-1][:200] if lines else ""
