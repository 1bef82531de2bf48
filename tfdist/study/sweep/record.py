"""The sweep's record, DIR/sweep.json: its elements (index -> settings), what each runs and what
was submitted; and where an element's run directory and log are."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Optional

from tfdist.errors import ConfigError
from tfdist.files import write_json
from tfdist.study.sweep.grid import Element, elements_of

SWEEP_FILE = "sweep.json"


def new_sweep(settings: Sequence[dict[str, str]], job: str, train_args: list[str],
              command: list[str], sbatch_args: list[str]) -> dict[str, Any]:
    return {
        "job":
        job,
        "train_args":
        train_args,
        "command":
        command,
        "sbatch_args":
        sbatch_args,
        "elements": [{
            "index": e.index,
            "settings": dict(e.settings),
            "name": e.name
        } for e in elements_of(settings)],
        "submissions": [],
    }


def load(directory: str) -> dict[str, Any]:
    path = os.path.join(directory, SWEEP_FILE)
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{directory} is not a sweep's directory (no {SWEEP_FILE}); start one "
                          f"with `tfdist sweep {directory} --grid=...`.") from None


def save(directory: str, sweep: dict[str, Any]) -> None:
    write_json(os.path.join(directory, SWEEP_FILE), sweep)


def same_plan(old: dict[str, Any], new: dict[str, Any]) -> Optional[str]:
    """None when `new` is the sweep `old` already is; else what differs."""
    for key in ("job", "train_args", "command", "elements"):
        if old[key] != new[key]:
            return key
    return None


def element(sweep: dict[str, Any], directory: str, index: int) -> tuple[str, list[str]]:
    """The element's MODEL_DIR and its flags (what jobs/common.sh runs it with)."""
    listed = sweep["elements"]
    if not 0 <= index < len(listed):
        raise ConfigError(f"Element {index} is not in the sweep {directory}, which has "
                          f"{len(listed)} (0..{len(listed) - 1}).")
    e = listed[index]
    return run_dir(directory, e), Element(index, tuple(e["settings"].items())).args


def run_dir(directory: str, e: dict[str, Any]) -> str:
    return os.path.join(os.path.abspath(directory), "runs", e["name"])


def log_path(directory: str, array_job: str, task: int) -> str:
    return os.path.join(os.path.abspath(directory), "logs", f"{array_job}_{task}.out")
