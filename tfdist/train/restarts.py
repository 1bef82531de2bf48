"""After a hang or a lost peer: requeue the Slurm job (when asked, $TFDIST_REQUEUE=1) so it resumes
from its last checkpoint, at most $TFDIST_MAX_RESTARTS times a job; then a plain failure that
says what happened each time.

Each such end is one line of PROGRESS_DIR/restarts.jsonl (job id, SLURM_RESTART_COUNT, what).
The budget counts this job's requeued lines: time-limit requeues (preemption) do not use it.
Reuses the preemption's requeue (tfdist.cluster.requeue). No TensorFlow.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Optional

from tfdist import env_vars
from tfdist.cluster.requeue import RequeueFailed, requeue
from tfdist.cluster.slurm import requeue_wanted
from tfdist.errors import SAME_RUN_DIRECTORY, ConfigError

log = logging.getLogger("tfdist")
RERUN = f"Re-run the same command with {SAME_RUN_DIRECTORY} to resume."

MAX_RESTARTS_ENV = env_vars.MAX_RESTARTS.name
DEFAULT_MAX_RESTARTS = 2
HISTORY = "restarts.jsonl"


def max_restarts(environ=None) -> int:
    environ = os.environ if environ is None else environ
    value = environ.get(MAX_RESTARTS_ENV, "")
    try:
        n = int(value) if value else DEFAULT_MAX_RESTARTS
    except ValueError:
        n = -1
    if n < 0:
        raise ConfigError(f"{MAX_RESTARTS_ENV}={value!r}: expected a whole number >= 0 (how "
                          "often a job that hung or lost a task is requeued; 0: never).")
    return n


def _history(directory: Optional[str]) -> list[dict]:
    if not directory:
        return []
    try:
        with open(os.path.join(directory, HISTORY)) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return []


def end_after_failure(directory: Optional[str],
                      what: str,
                      requeue_on: Optional[bool] = None) -> str:
    """Record `what` ended this run and requeue the job when asked and the budget allows; the
    words to end the summary with (requeued, or not and why, with every earlier run's story)."""
    environ = os.environ
    job = environ.get("SLURM_JOB_ID")
    restart = int(environ.get("SLURM_RESTART_COUNT", "0") or 0)
    wanted = requeue_wanted() if requeue_on is None else requeue_on
    earlier = [h for h in _history(directory) if job and h.get("job") == job]
    used = sum(1 for h in earlier if h.get("requeued"))
    limit = max_restarts()
    requeued, outcome = False, ""
    if not wanted:
        outcome = ("Not requeued (requeue is off: TFDIST_REQUEUE=1, set by the jobs/ scripts, "
                   f"turns it on). {RERUN}")
    elif not job:
        outcome = "Not requeued: no Slurm job (no SLURM_JOB_ID). Re-run to resume."
    elif used >= limit:
        story = "; ".join(f"run {h['restart'] + 1} (SLURM_RESTART_COUNT={h['restart']}): "
                          f"{h['what']}" for h in earlier)
        outcome = (
            f"Not requeued: this job was already requeued {used} time(s) after a hang or a "
            f"lost task ({MAX_RESTARTS_ENV}={limit}). Each time: {story}; now run "
            f"{restart + 1}: {what}. Find the cause in the stacks above before resubmitting.")
    else:
        try:
            requeued = requeue()
        except RequeueFailed as e:
            outcome = f"Not requeued: {e}."
        if requeued:
            outcome = (f"Requeued the job (restart {used + 1} of at most {limit}, "
                       f"{MAX_RESTARTS_ENV}); it resumes from the last checkpoint.")
    if directory:
        try:
            os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, HISTORY), "a") as f:
                f.write(
                    json.dumps(
                        dict(job=job,
                             restart=restart,
                             time=time.time(),
                             what=what,
                             requeued=requeued)) + "\n")
        except OSError as e:
            log.warning("could not record the restart in %s: %s", directory, e)
    return outcome
