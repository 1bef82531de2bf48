"""Requeue this Slurm job with `scontrol requeue` (preemption, the watchdog's restarts), unless its
user cancelled it. The one action on the scheduler that the cluster layer takes; no TensorFlow."""

from __future__ import annotations

import logging
import os
import re
import subprocess
from collections.abc import Mapping
from typing import Optional

from tfdist.cluster.errors import ClusterError
from tfdist.cluster.slurm import job_id

log = logging.getLogger("tfdist")


class RequeueFailed(ClusterError):
    """`scontrol requeue` did not requeue the job (the run stays resumable by re-submitting)."""


def cancelled(job: str) -> bool:
    """Whether the job is being (or was) cancelled with scancel. slurmctld marks such a job
    COMPLETING with no reason before its tasks get SIGTERM; at the time limit the reason is
    TimeLimit, and a preempted job is still RUNNING. False when scontrol cannot say."""
    try:
        result = subprocess.run(["scontrol", "show", "job", "-o", job],
                                capture_output=True,
                                text=True,
                                timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    fields = dict(re.findall(r"\b(JobState|Reason)=(\S+)", result.stdout))
    state, reason = fields.get("JobState"), fields.get("Reason")
    return state == "CANCELLED" or (state == "COMPLETING" and reason == "None")


def job_spec(environ: Mapping[str, str]) -> str:
    """This job as scontrol names it: an array element as ARRAY_TASK (`tfdist sweep`), so that
    requeueing it requeues the element and never the whole array; else the job id."""
    array, task = environ.get("SLURM_ARRAY_JOB_ID"), environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else job_id(environ)


def requeue(environ: Optional[Mapping[str, str]] = None) -> bool:
    """`scontrol requeue` this Slurm job (call it on rank 0 only; also under `tfdist launch` inside
    an allocation); False, said in the log, outside a Slurm job. Raises RequeueFailed, with
    scontrol's own words, when scontrol is missing or fails."""
    environ = os.environ if environ is None else environ
    if job_id(environ) is None:
        log.warning("not requeued: this process runs in no Slurm job (no SLURM_JOB_ID).")
        return False
    job = job_spec(environ)
    if cancelled(job):
        # scancel sends the SIGTERM a preemption sends, and Slurm requeues even a cancelled job.
        log.warning(
            "not requeued: Slurm job %s was cancelled (scancel); its checkpoint stays, "
            "re-submit the same command to resume", job)
        return False
    try:
        result = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True)
    except OSError as e:
        raise RequeueFailed(f"`scontrol requeue {job}` could not run ({e})") from e
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip() or "no message"
        raise RequeueFailed(f"`scontrol requeue {job}` failed with status {result.returncode}: "
                            f"{said}. Submit with `#SBATCH --requeue`, or re-submit the job "
                            "yourself")
    log.warning("requeued Slurm job %s; it resumes from the checkpoint when it runs again", job)
    return True
