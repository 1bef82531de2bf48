"""One row per element: its state (done, pending, running, failed, stopped, cancelled, not
submitted) from Slurm's queue, its metrics.json and its log; and which to resubmit."""

from __future__ import annotations

import json
import os
from typing import Any, Optional

from tfdist.study.sweep import logs
from tfdist.study.sweep.record import load, log_path, run_dir
from tfdist.study.sweep.squeue import ACTIVE, live_states
from tfdist.study.sweep.submit import Runner, run_slurm


def last_submission(sweep: dict[str, Any], index: int) -> Optional[dict[str, Any]]:
    for s in reversed(sweep["submissions"]):
        if index in s["indices"]:
            return s
    return None


def element_status(directory: str, sweep: dict[str, Any], e: dict[str, Any],
                   live: dict[str, str]) -> dict[str, Any]:
    """state (done, pending, running, failed, stopped, cancelled, not submitted), its detail,
    requeues, epochs, final metrics and log of one element."""
    row: dict[str, Any] = {"index": e["index"], "name": e["name"], "settings": e["settings"]}
    metrics_path = os.path.join(run_dir(directory, e), "metrics.json")
    metrics = _read_json(metrics_path) or {}
    row["final"] = metrics.get("final") or {}
    row["epochs"] = metrics.get("epochs")
    sub = last_submission(sweep, e["index"])
    log = None
    if sub is not None:
        task = e["index"] - sub["offset"]
        row["job"] = f"{sub['array_job']}_{task}"
        log = log_path(directory, sub["array_job"], task)
        row["log"] = log
    text = logs.read(log) if log else ""
    row["requeues"] = logs.requeues(text)
    state = live.get(row.get("job", ""))
    if state in ACTIVE:
        row["state"], row["detail"] = state.lower(), ""
    elif row["final"]:
        row["state"], row["detail"] = "done", ""
    elif sub is None:
        row["state"], row["detail"] = "not submitted", ""
    else:
        row["state"], row["detail"] = logs.ended(text)
    return row


def status(directory: str, run: Runner = run_slurm) -> list[dict[str, Any]]:
    sweep = load(directory)
    live = live_states(sweep, run) if sweep["submissions"] else {}
    return [element_status(directory, sweep, e, live) for e in sweep["elements"]]


def unfinished(rows: list[dict[str, Any]], failed_only: bool = False) -> list[int]:
    """The elements to resubmit: failed, stopped, cancelled (and never submitted, unless
    `failed_only`); never the done, pending or running ones."""
    wanted = {"failed", "stopped", "cancelled"} | (set() if failed_only else {"not submitted"})
    return [r["index"] for r in rows if r["state"] in wanted]


def _read_json(path: str) -> Optional[dict]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
