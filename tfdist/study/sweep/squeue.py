"""The elements Slurm still knows: their states, from squeue."""

from __future__ import annotations

from typing import Any

from tfdist.study.sweep.submit import Runner, run_slurm

# Slurm's states of a job that is queued, runs or is about to run again.
ACTIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED")


def live_states(sweep: dict[str, Any], run: Runner = run_slurm) -> dict[str, str]:
    """squeue's state of every element job still known to Slurm, by "ARRAY_TASK" id."""
    arrays = sorted({s["array_job"] for s in sweep["submissions"]})
    if not arrays:
        return {}
    done = run(["squeue", "-h", "-r", "-o", "%i %T", "-j", ",".join(arrays)])
    states = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states
