"""Preemption and the Slurm time limit: stop at an agreed step, checkpoint, requeue, exit 75.

`sbatch --signal=USR1@60` (or a scheduler's SIGTERM) reaches every task. Each records it; about
every CHECK_SECONDS (a step count that the chief sets) the training tasks agree in one tiny
collective whether any of them was signalled, so all stop after the same step and the collective
checkpoint lines up. When model.fit has stopped, rank 0 requeues the Slurm job (when asked), every
task waits for it, and model.fit raises Preempted: the process ends with status 75 unless the
script catches it, in a user's script as in `tfdist train`.

Test-only: with TFDIST_TEST_PAUSE_AFTER_STEP=N (or N:FILE) in the environment, every task that
runs these callbacks and starts training before global step N waits at its first preemption
check at or after step N (a step's end,
or an epoch's end where batch callbacks are refused) until it is signalled (or FILE exists), so a
test can send its signal, or do what it must, while training is certainly still going on, on any
machine, however fast. It is not a user setting.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from typing import Optional

from tfdist import env_vars
from tfdist.cluster.requeue import RequeueFailed
from tfdist.cluster.requeue import requeue as requeue_job
from tfdist.errors import ConfigError
from tfdist.train.restarts import RERUN
from tfdist.train.checkpoint import TrainingCheckpoint, latest
from tfdist.keras_compat import adapter
from tfdist.keras_compat.callback import Callback

log = logging.getLogger("tfdist")

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
EXIT_PREEMPTED = 75  # EX_TEMPFAIL, "try again": the run is resumable from its checkpoint
PAUSE_AFTER_STEP = env_vars.TEST_PAUSE_AFTER_STEP.name  # test-only, see the module docstring
# Seconds between the tasks' agreements. Each costs a collective, a host sync and the wait for the
# slowest task (about +3 % CPU per sample at 1 s on the bench's small CNN); a signal is acted on
# within it. 3 s of the 60 s that `--signal=USR1@60` gives (and of Slurm's KillWait after a
# preemption's SIGTERM: 30 s by default, 15 s on the test cluster) leave the step's end, the
# checkpoint and the requeue the rest.
CHECK_SECONDS = 3.0
MAX_CHECK_STEPS = 3000  # the interval in steps at most (fast steps: about CHECK_SECONDS at 1 ms)

_caught: dict[str, Optional[int]] = {"signal": None}


class Preempted(SystemExit):
    """Training stopped on a signal after checkpointing; re-running resumes it. A SystemExit with
    status 75: uncaught it ends the process with that status, and `except Exception` in a
    user's script does not swallow it."""

    def __init__(self, message: str):
        super().__init__(EXIT_PREEMPTED)
        self.message = message

    def __str__(self) -> str:
        return self.message


def catch_signals() -> None:
    """From now on SIGTERM and SIGUSR1 are recorded instead of ending the process. Call it early
    (`tfdist train` does before TensorFlow starts) and again when training begins (the
    PreemptionHandler does): MultiWorkerMirroredStrategy's coordination service installs its own
    C++ SIGTERM handler when it starts, which would otherwise end the process."""

    def record(signum, frame):
        if _caught["signal"] is None:
            log.warning("received %s; stopping after an agreed step to checkpoint",
                        signal.Signals(signum).name)
        _caught["signal"] = signum

    for sig in SIGNALS:
        signal.signal(sig, record)


def signalled() -> bool:
    return _caught["signal"] is not None


class _TestPause:
    """The test hook of the module docstring: pause once, at or after a global step."""

    def __init__(self):
        value = os.environ.get(PAUSE_AFTER_STEP, "")
        step, _, self.release = value.partition(":")
        self.step = int(step) if step else None

    def begin(self, model) -> None:
        """A run that resumes at or past the step (a requeued one) does not wait again."""
        if self.step is not None and int(model.optimizer.iterations.numpy()) >= self.step:
            self.step = None

    def __call__(self, model) -> None:
        if self.step is None or int(model.optimizer.iterations.numpy()) < self.step:
            return
        until = f"{self.release} exists" if self.release else "a signal"
        print(
            f"tfdist: {PAUSE_AFTER_STEP}={self.step}: paused at global step "
            f"{int(model.optimizer.iterations.numpy())} until {until}",
            file=sys.stderr,
            flush=True)
        self.step = None  # once
        while not (signalled() or (self.release and os.path.exists(self.release))):
            time.sleep(0.01)


class PreemptionHandler(Callback):
    """At the end of an epoch, stop every task if any was signalled; when fit ends so, requeue
    (rank 0, with `requeue`) and raise Preempted. Put it last: the others' on_train_end run
    first. `engine`: the tasks' agreement; `checkpoint`: the one that saved (or None)."""

    def __init__(self,
                 engine,
                 checkpoint: Optional[TrainingCheckpoint] = None,
                 requeue: bool = False):
        super().__init__()
        catch_signals()
        self.engine, self.checkpoint, self.requeue = engine, checkpoint, requeue
        self.preempted_at: Optional[tuple[int, int]] = None
        self.saved: Optional[str] = None
        self._epoch = 0
        self._test_pause = _TestPause()

    def on_train_begin(self, logs=None):
        catch_signals()  # again: the engine may have taken SIGTERM since
        self._test_pause.begin(self.model)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        # The checkpoint callback (before this one) has just saved the finished epoch.
        self._test_pause(self.model)
        if self.preempted_at is None and self.engine.any_task(signalled()):
            self.preempted_at = (epoch + 1, 0)
            if self.checkpoint is not None:
                found = latest(self.checkpoint.model_dir)
                self.saved = found[0] if found else None
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.preempted_at is None:
            return
        epoch, step = self.preempted_at
        requeued, failed = False, None
        if self.requeue and self.engine.rank == 0:
            try:
                requeued = requeue_job()
            except RequeueFailed as e:  # reported, never dropped; the run stays resumable
                log.error("%s", e)
                failed = str(e)
        # No task leaves before rank 0 has requeued: under `srun --kill-on-bad-exit` an early
        # exit would get rank 0 killed first.
        self.engine.barrier()
        # The checkpoint's position as the resume line writes it: epochs done, steps into the next.
        at = f"after epoch {epoch}" if step == 0 else f"at step {step} of epoch {epoch + 1}"
        saved = (f"{self.saved} (epoch {epoch}, step {step})" if self.saved else "the chief's"
                 if self.checkpoint is not None and not self.engine.is_chief else "none")
        message = (f"preempted {at}; checkpoint: {saved}. " +
                   ("The job was requeued and resumes from it." if requeued else
                    (f"{failed}. " if failed else "") + RERUN))
        log.warning("%s", message)
        raise Preempted(message)


class StepPreemptionHandler(PreemptionHandler):
    """Also checks between epochs' ends, so a job stops within seconds, mid-epoch, and
    checkpoints that step. Alone it looks at its own flag after every step. With several tasks
    (`several_tasks`) they agree in one tiny collective, first after `check_steps` steps; then
    the chief sets the interval so that agreements come about every `check_seconds` (at least
    `check_steps`, at most `max_steps` steps) and sends it with each agreement: small fast steps
    do not pay for a collective each, and a signal is acted on within about check_seconds."""

    def __init__(self,
                 engine,
                 checkpoint: Optional[TrainingCheckpoint] = None,
                 requeue: bool = False,
                 several_tasks: bool = False,
                 check_steps: int = 10,
                 check_seconds: float = CHECK_SECONDS,
                 max_steps: int = MAX_CHECK_STEPS):
        super().__init__(engine, checkpoint, requeue)
        # Reads no logs: tf-keras need not fetch them to the host after every step. On the
        # instance: Callback.__init__ sets it False there (a class attribute is hidden).
        self._supports_tf_logs = True
        if check_steps < 1:
            raise ConfigError(f"check_steps={check_steps}: expected >= 1.")
        if not several_tasks:
            check_steps = 1  # alone: look at the own flag after every step, no collective
        self.check_steps, self.interval = check_steps, check_steps
        self.several_tasks, self.check_seconds, self.max_steps = (several_tasks, check_seconds,
                                                                  max_steps)
        self.agreements: list[tuple[int, int]] = []  # (step, interval set then), for the logs
        self._steps = 0
        self._last_check = (0, time.perf_counter())

    def on_train_batch_end(self, batch, logs=None):
        self._steps += 1
        self._test_pause(self.model)
        if self._steps - self._last_check[0] < self.interval:
            return
        if self._agree(signalled()):
            self.preempted_at = (self._epoch, adapter(self.model).steps_done(self.model, batch))
            if self.checkpoint is not None:
                self.checkpoint.suspend_epoch_save = True
                self.saved = self.checkpoint.save(*self.preempted_at)
            self.model.stop_training = True

    def _agree(self, flag: bool) -> bool:
        if not self.several_tasks:
            self._last_check = (self._steps, 0.0)  # alone: no interval to time
            return flag
        steps, since = self._last_check
        now = time.perf_counter()
        proposal = 0.0
        if self.engine.is_chief:
            per_step = (now - since) / max(1, self._steps - steps)
            proposal = min(self.max_steps,
                           max(self.check_steps, round(self.check_seconds / max(per_step, 1e-6))))
        rows = self.engine.gather_floats([1.0 if flag else 0.0, float(proposal)])
        self.interval = int(max(row[1] for row in rows))  # the chief's; the others send 0
        self.agreements.append((self._steps, self.interval))
        self._last_check = (self._steps, now)
        return any(row[0] > 0 for row in rows)

    def on_epoch_end(self, epoch, logs=None):
        if self.preempted_at is None:
            super().on_epoch_end(epoch, logs)
