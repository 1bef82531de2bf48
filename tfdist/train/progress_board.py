"""The watchdog's side channel: each training process's last completed step, in one small file a
rank under a shared directory (MODEL_DIR/progress/rank-N.json), kept fresh by a heartbeat.

It works while a collective hangs (no TensorFlow, only files: shared file systems are the norm
on Slurm), and it tells a frozen process (its heartbeat stops) from one that is alive but stuck.
Records carry the run's identity (Slurm job, restart and step, or `tfdist launch`'s port), so a
previous run's files in the same directory are ignored. No TensorFlow, no Keras.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Optional

from tfdist import env_vars
from tfdist.files import replacing

PROGRESS_DIR_ENV = env_vars.PROGRESS_DIR.name  # a shared directory when there is no model_dir
_RUN_VARS = ("SLURM_JOB_ID", "SLURM_RESTART_COUNT", "SLURM_STEP_ID", env_vars.LAUNCH_PORT.name)


def progress_dir(model_dir: Optional[str]) -> Optional[str]:
    """$TFDIST_PROGRESS_DIR, else MODEL_DIR/progress, else None (no side channel)."""
    if os.environ.get(PROGRESS_DIR_ENV):
        return os.environ[PROGRESS_DIR_ENV]
    return os.path.join(model_dir, "progress") if model_dir else None


def run_id(environ=None) -> str:
    """What tells this run from earlier ones in the same directory."""
    environ = os.environ if environ is None else environ
    return ".".join(environ.get(v, "-") for v in _RUN_VARS)


class ProgressBoard:
    """Read and write the ranks' records in `directory`."""

    def __init__(self, directory: str, rank: int, run: Optional[str] = None):
        self.directory, self.rank = directory, rank
        self.run = run_id() if run is None else run
        os.makedirs(directory, exist_ok=True)

    def path(self, rank: int) -> str:
        return os.path.join(self.directory, f"rank-{rank}.json")

    def publish(self, record: dict[str, Any]) -> None:
        """This rank's record, replaced whole (readers never see half of one)."""
        with replacing(self.path(self.rank)) as tmp:
            with open(tmp, "w") as f:
                json.dump(dict(record, rank=self.rank, run=self.run), f)

    def read(self, rank: int) -> Optional[dict[str, Any]]:
        """`rank`'s record of this run, or None (none yet, or an earlier run's)."""
        try:
            with open(self.path(rank)) as f:
                record = json.load(f)
        except (OSError, ValueError):
            return None
        return record if record.get("run") == self.run else None

    def watch(self, ranks: list[int], seconds: float, settled) -> dict[int, dict[str, Any]]:
        """Read `ranks`' records for up to `seconds`, sooner once `settled(records)`; each record
        gets `alive`: its heartbeat advanced meanwhile, or it says it has stalled (it is running
        Python; a frozen process does neither)."""
        first = {r: self.read(r) for r in ranks}
        deadline = time.monotonic() + seconds
        while True:
            now = {r: self.read(r) for r in ranks}
            for r, record in now.items():
                if record is None:
                    continue
                before = first[r] or {}
                record["alive"] = bool(
                    record.get("state") != "running" or record.get("beat") != before.get("beat"))
            if settled(now) or time.monotonic() > deadline:
                return now
            time.sleep(0.2)
