"""Preemption and the Slurm time limit: stop at an agreed step, checkpoint, requeue or exit 75.

`sbatch --signal=USR1@60` (or a scheduler's SIGTERM) reaches every task. Each records it; about
every second (a step count that the chief sets) the training tasks agree in one tiny collective
whether any of them was signalled, so all stop after the same step and the collective checkpoint
lines up.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from typing import Optional

import tensorflow as tf

from tfdist.train.checkpoint import TrainingCheckpoint, latest

log = logging.getLogger("tfdist")

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
EXIT_PREEMPTED = 75  # EX_TEMPFAIL: "try again" -- the run is resumable from its checkpoint


class PreemptionHandler(tf.keras.callbacks.Callback):
    """Catch SIGTERM/SIGUSR1 from the moment it is made; at the end of an epoch, stop every task
    if any was signalled. `attach` it to the engine and checkpoint before fit."""

    def __init__(self):
        super().__init__()
        self.engine = None
        self.checkpoint: Optional[TrainingCheckpoint] = None
        self.signal: Optional[int] = None
        self.preempted_at: Optional[tuple[int, int]] = None
        self.saved: Optional[str] = None
        self._epoch = 0
        for sig in SIGNALS:  # now, so a signal during start-up is not fatal either
            signal.signal(sig, self._record)

    def attach(self, engine, checkpoint: Optional[TrainingCheckpoint]) -> "PreemptionHandler":
        self.engine, self.checkpoint = engine, checkpoint
        return self

    def _record(self, signum, frame):
        if self.signal is None:
            log.warning("tfdist: received %s; stopping after an agreed step to checkpoint",
                        signal.Signals(signum).name)
        self.signal = signum

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        # The checkpoint callback (added before this one) has just saved the finished epoch.
        if self.preempted_at is None and self.engine.any_task(self.signal is not None):
            self.preempted_at = (epoch + 1, 0)
            if self.checkpoint is not None:
                found = latest(self.checkpoint.model_dir)
                self.saved = found[0] if found else None
            self.model.stop_training = True


class StepPreemptionHandler(PreemptionHandler):
    """Also checks between epochs' ends, so a job stops within seconds, mid-epoch, and
    checkpoints that step. Alone it looks at its own flag after every step. With several tasks
    (`several_tasks`) they agree in one tiny collective, first after `check_steps` steps; then
    the chief sets the interval so that agreements come about every `check_seconds` (at least
    `check_steps`, at most `max_steps` steps) and sends it with each agreement: small fast steps
    do not pay for a collective each, and a signal is acted on within about check_seconds."""

    def __init__(self,
                 check_steps: int = 1,
                 taking_over: Optional[PreemptionHandler] = None,
                 several_tasks: bool = False,
                 check_seconds: float = 1.0,
                 max_steps: int = 1000):
        super().__init__()
        if check_steps < 1:
            raise ValueError(f"check_steps={check_steps}: expected >= 1.")
        self.check_steps, self.interval = check_steps, check_steps
        self.several_tasks, self.check_seconds, self.max_steps = (several_tasks, check_seconds,
                                                                  max_steps)
        self.agreements: list[tuple[int, int]] = []  # (step, interval set then), for the logs
        self._steps = 0
        self._last_check = (0, time.perf_counter())
        if taking_over is not None:  # a signal the start-up handler already caught
            self.signal = taking_over.signal

    def on_train_batch_end(self, batch, logs=None):
        self._steps += 1
        if self._steps - self._last_check[0] < self.interval:
            return
        if self._agree(self.signal is not None):
            self.preempted_at = (self._epoch, batch + 1)
            if self.checkpoint is not None:
                self.checkpoint.suspend_epoch_save = True
                self.saved = self.checkpoint.save(*self.preempted_at)
            self.model.stop_training = True

    def _agree(self, signalled: bool) -> bool:
        if not self.several_tasks:
            self._last_check = (self._steps, 0.0)  # alone: no interval to time
            return self.engine.any_task(signalled)
        steps, since = self._last_check
        now = time.perf_counter()
        proposal = 0.0
        if self.engine.is_chief:
            per_step = (now - since) / max(1, self._steps - steps)
            proposal = min(self.max_steps,
                           max(self.check_steps, round(self.check_seconds / max(per_step, 1e-6))))
        rows = self.engine.gather_floats([1.0 if signalled else 0.0, float(proposal)])
        self.interval = int(max(row[1] for row in rows))  # the chief's; the others send 0
        self.agreements.append((self._steps, self.interval))
        self._last_check = (self._steps, now)
        return any(row[0] > 0 for row in rows)

    def on_epoch_end(self, epoch, logs=None):
        if self.preempted_at is None:
            super().on_epoch_end(epoch, logs)


class RequeueFailed(RuntimeError):
    """`scontrol requeue` did not requeue the job (the run stays resumable by re-submitting)."""


def requeue_slurm_job(environ=None) -> bool:
    """`scontrol requeue` this Slurm job (call on rank 0 only); False when not under Slurm.

    Raises RequeueFailed, with scontrol's own words, when scontrol is missing or fails."""
    environ = os.environ if environ is None else environ
    job_id = environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID")
    if not job_id:
        log.warning("tfdist: --requeue outside a Slurm job (no SLURM_JOB_ID): nothing to requeue")
        return False
    try:
        result = subprocess.run(["scontrol", "requeue", job_id], capture_output=True, text=True)
    except OSError as e:
        raise RequeueFailed(f"`scontrol requeue {job_id}` could not run ({e})") from e
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip() or "no message"
        raise RequeueFailed(f"`scontrol requeue {job_id}` failed with status "
                            f"{result.returncode}: {said}. Submit with `#SBATCH --requeue`, or "
                            "re-submit the job yourself")
    log.warning("tfdist: requeued Slurm job %s; it resumes from the checkpoint when it runs again",
                job_id)
    return True
