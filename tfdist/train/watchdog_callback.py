"""The Keras side of the progress watchdog: fit's hooks feed tfdist.train.watchdog.Watchdog.

Only the standard hooks (a Keras 3 callback adapter can forward them as they are, or call
`watchdog.step_completed()` / `watchdog.slow_phase()` itself), and the counter of finished steps
that tfdist.keras_compat.train_counter finds (tf-keras's own; tfdist's under parameter_server):
where there is one, the watchdog's thread reads it and no training step calls the callback, so
tf-keras runs no per-batch callback machinery for it. Keras 3 (outside parameter_server) has no
such counter and calls every callback's batch hooks anyway: there the hook feeds the watchdog.
Put it first in the list, so the other callbacks' epoch-end work (checkpoints, TensorBoard) gets
the slow-phase grace.
"""

from __future__ import annotations

from typing import Callable, Optional

from tfdist.keras_compat import adapter, train_counter
from tfdist.keras_compat.callback import Callback
from tfdist.train.watchdog import Watchdog

EPOCH_END_READ = 30.0  # seconds the epoch's end waits for the step counter on a parameter server


class WatchdogCallback(Callback):
    """Starts the watchdog with fit, feeds it each completed step (training and validation),
    stops it when fit ends. Keras calls no hook when fit raises: a script that catches an error
    of fit and goes on without training should `stop()` the watchdog (`rt.callbacks(...)
    .watchdog`), or it ends the process after its time."""

    def __init__(self, watchdog: Watchdog, activity: Optional[Callable[[], tuple]] = None):
        """`activity`: counters of the batches this task's steps have taken (the watchdog's
        watch_activity), except where the steps are scheduled (parameter_server: the step
        counter is exact there)."""
        super().__init__()
        self._activity = activity
        # Reads no logs: Keras need not fetch them per step, and parameter_server allows its
        # batch hooks (there they run as steps are scheduled; a full queue of steps blocks them).
        # An instance attribute: Callback.__init__ sets it False on the instance.
        self._supports_tf_logs = True
        self.watchdog = watchdog
        self._polled = self._scheduled = False

    def set_model(self, model):
        super().set_model(model)
        # tf-keras's CallbackList asks _implements_train_batch_hooks after set_model.
        self._polled = train_counter(model) is not None
        self._steps_per_call = adapter(model).steps_per_execution

    def _implements_train_batch_hooks(self):
        """tf-keras: no per-batch callback machinery for this callback where the watchdog reads
        the counter (Keras 3 does not ask: it calls every callback's batch hooks)."""
        return not self._polled

    def on_train_begin(self, logs=None):
        # The watchdog's thread reads the steps done from Keras's step counter where there is
        # one: tf-keras's (fit has just set it to 0), exact (incremented after each step's
        # outputs) and no call per step. parameter_server needs it: the hooks run as steps are
        # scheduled (the queue holds 256K); there the counter is on a ps. Not the optimizer's
        # counter: a train_step that steps optimizers of its own (a GAN) leaves that at 0, and
        # the watchdog would end a healthy run.
        # tfdist's fit for Keras 3 under parameter_server makes one before the callbacks start.
        counter = train_counter(self.model)
        self._scheduled = getattr(self.model, "_cluster_coordinator", None) is not None
        self._polled = counter is not None
        self.watchdog.poll_steps((lambda: int(counter.numpy())) if self._polled else None,
                                 local=not self._scheduled)
        self.watchdog.watch_activity(None if self._scheduled else self._activity)
        self.watchdog.start()

    def on_train_batch_end(self, batch, logs=None):
        # Called where another callback turns tf-keras's batch hooks on: counted once, polled.
        if not self._polled:
            # Keras 3 (the Keras fed here) runs every call in full: steps_per_execution steps.
            self.watchdog.step_completed(self._steps_per_call(self.model))

    def on_test_batch_end(self, batch, logs=None):
        self.watchdog.progressed()

    def on_epoch_begin(self, epoch, logs=None):
        self.watchdog.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if self._scheduled:  # every scheduled step has run: the exact count
            self.watchdog.read_steps(EPOCH_END_READ)
        self.watchdog.slow_phase()

    def on_test_begin(self, logs=None):
        self.watchdog.slow_phase()

    def on_train_end(self, logs=None):
        self.watchdog.stop()
