"""Preemption and the Slurm time limit: stop at an agreed step, checkpoint, requeue or exit 75.

`sbatch --signal=USR1@60` (or a scheduler's SIGTERM) reaches every task. Each records it; every
`check_steps` steps the training tasks agree (one tiny all-reduce) whether any of them was
signalled, so all stop after the same step and the collective checkpoint lines up.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from typing import Optional

import tensorflow as tf

from tfdist.train.checkpoint import TrainingCheckpoint

log = logging.getLogger("tfdist")

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
EXIT_PREEMPTED = 75  # EX_TEMPFAIL: "try again" -- the run is resumable from its checkpoint


class PreemptionHandler(tf.keras.callbacks.Callback):
    """Catch SIGTERM/SIGUSR1 during fit; stop every task after the same step and checkpoint.

    Add it after the TrainingCheckpoint it saves through.
    """

    def __init__(self, engine, checkpoint: Optional[TrainingCheckpoint], check_steps: int = 1):
        super().__init__()
        if check_steps < 1:
            raise ValueError(f"check_steps={check_steps}: expected >= 1.")
        self.engine, self.checkpoint, self.check_steps = engine, checkpoint, check_steps
        self.signal: Optional[int] = None
        self.preempted_at: Optional[tuple[int, int]] = None
        self.saved: Optional[str] = None
        self._previous = {}
        self._epoch = 0
        self._steps = 0

    def _record(self, signum, frame):
        if self.signal is None:
            log.warning("tfdist: received %s; stopping after an agreed step to checkpoint",
                        signal.Signals(signum).name)
        self.signal = signum

    def on_train_begin(self, logs=None):
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._record)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        self._steps += 1
        if self._steps % self.check_steps:
            return
        if self.engine.any_task(self.signal is not None):
            self.preempted_at = (self._epoch, batch + 1)
            if self.checkpoint is not None:
                self.checkpoint.suspend_epoch_save = True
                self.saved = self.checkpoint.save(*self.preempted_at)
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


def requeue_slurm_job(environ=None) -> bool:
    """`scontrol requeue` this Slurm job (call on rank 0 only); False when not under Slurm."""
    environ = os.environ if environ is None else environ
    job_id = environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID")
    if not job_id:
        return False
    result = subprocess.run(["scontrol", "requeue", job_id], capture_output=True, text=True)
    if result.returncode != 0:
        log.error(
            "tfdist: `scontrol requeue %s` failed: %s. Submit with `#SBATCH --requeue` "
            "(or re-submit by hand; training resumes from the checkpoint).", job_id,
            result.stderr.strip())
        return False
    log.warning("tfdist: requeued Slurm job %s; it resumes from the checkpoint when it runs again",
                job_id)
    return True
