"""The Keras side of the progress watchdog: fit's hooks feed tfdist.train.watchdog.Watchdog.

Only the standard hooks and the optimizer's step counter, no model internals: a Keras 3 callback
adapter can forward them as they are (or call `watchdog.step_completed()` /
`watchdog.slow_phase()` itself). No per-step hook: the watchdog's thread polls the counter. Put
it first in the list, so the other callbacks' epoch-end work (checkpoints, TensorBoard) gets the
slow-phase grace.
"""

from __future__ import annotations

import tensorflow as tf

from tfdist.train.watchdog import Watchdog


class WatchdogCallback(tf.keras.callbacks.Callback):
    """Starts the watchdog with fit, lets it poll the steps done (and feeds it validation steps),
    stops it when fit ends. Keras calls no hook when fit raises: a script that catches an error
    of fit and goes on without training should `stop()` the watchdog (`rt.callbacks(...)
    .watchdog`), or it ends the process after its time."""

    def __init__(self, watchdog: Watchdog):
        super().__init__()
        # Reads no logs: Keras need not fetch them after a validation step, and
        # parameter_server allows its batch hooks. An instance attribute: Callback.__init__ sets
        # it False on the instance.
        self._supports_tf_logs = True
        self.watchdog = watchdog

    def on_train_begin(self, logs=None):
        # The watchdog's thread reads the steps done from the optimizer's counter each interval
        # rather than being told after every step: no batch hook, so Keras runs none of its
        # per-step callback machinery (where no other callback needs it), and under
        # parameter_server, whose hooks run as steps are scheduled (the queue holds 256K), the
        # counter (on a ps) is what tells steps done. Taken here, in fit's strategy scope: a
        # tf-keras legacy optimizer makes its counter on first use.
        iterations = self.model.optimizer.iterations
        self.watchdog.poll_steps(lambda: int(iterations.numpy()))
        self.watchdog.start()

    def on_test_batch_end(self, batch, logs=None):
        self.watchdog.progressed()

    def on_epoch_begin(self, epoch, logs=None):
        self.watchdog.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        self.watchdog.slow_phase()

    def on_test_begin(self, logs=None):
        self.watchdog.slow_phase()

    def on_train_end(self, logs=None):
        self.watchdog.stop()
