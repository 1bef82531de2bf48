"""The watchdog's Keras callback in one process: on tf-keras the watchdog reads the steps done from
tf-keras's step counter, so no training step calls a callback of it (tf-keras's per-batch callback
machinery stays off), and its count is exact, also beside a callback that turns the batch hooks
on (no step counted twice), and with steps_per_execution (steps, not calls)."""

from __future__ import annotations

import numpy as np
import pytest

from tfdist.train.watchdog import Watchdog
from tfdist.train.watchdog_callback import WatchdogCallback


@pytest.fixture(scope="module")
def tf_keras_fit():
    tf = pytest.importorskip("tensorflow")
    tf_keras = pytest.importorskip("tf_keras")
    data = tf.data.Dataset.from_tensor_slices((np.zeros(
        (16, 4), "float32"), np.zeros((16, 1), "float32"))).batch(4).repeat()

    def fit(steps_per_epoch, epochs, extra=lambda k: [], steps_per_execution=1):
        model = tf_keras.Sequential([tf_keras.layers.Input((4, )), tf_keras.layers.Dense(1)])
        model.compile("sgd", "mse", steps_per_execution=steps_per_execution)
        watchdog = Watchdog(0, 600.0)
        callback = WatchdogCallback(watchdog)
        calls = []
        watchdog.step_completed = lambda: calls.append(1)  # a fed step would land here
        model.fit(data,
                  steps_per_epoch=steps_per_epoch,
                  epochs=epochs,
                  verbose=0,
                  callbacks=[callback, *extra(tf_keras)])
        return callback, watchdog, calls

    return fit


def test_tf_keras_steps_are_read_not_fed(tf_keras_fit):
    callback, watchdog, calls = tf_keras_fit(7, 2)
    assert not callback._implements_train_batch_hooks()
    assert (watchdog.steps, calls) == (14, [])


def test_beside_a_batch_callback_no_step_counts_twice(tf_keras_fit):
    _, watchdog, calls = tf_keras_fit(
        7, 1, lambda k: [k.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: None)])
    assert (watchdog.steps, calls) == (7, [])


def test_steps_per_execution_counts_steps(tf_keras_fit):
    _, watchdog, _ = tf_keras_fit(8, 1, steps_per_execution=4)
    assert watchdog.steps == 8
