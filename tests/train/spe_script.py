"""A fit compiled with steps_per_execution=4 (2 epochs of 12 steps: 3 calls each) with tfdist's
watchdog and step checkpoint (every 6 steps) on it; what they counted, beside the truth: after
each call, the steps of the epoch tfdist reads from the hook's batch index and the ones the
optimizer's counter moved. argv: KERAS (2 or 3), MODEL_DIR, OUT (JSON)."""

import json
import os
import sys

import numpy as np

if sys.argv[1] == "2":
    os.environ["TF_USE_LEGACY_KERAS"] = "1"

import tfdist  # noqa: F401,E402  (its Keras 3 corrections)
import tensorflow as tf  # noqa: E402

from tfdist.keras_compat import adapter, keras_module  # noqa: E402
from tfdist.train.checkpoint import StepCheckpoint  # noqa: E402
from tfdist.train.watchdog import Watchdog  # noqa: E402
from tfdist.train.watchdog_callback import WatchdogCallback  # noqa: E402

keras = keras_module(int(sys.argv[1]))
model_dir, out = sys.argv[2:4]


class Positions(keras.callbacks.Callback):
    """(steps done as tfdist reads them, steps the optimizer counted in this epoch) per call."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_epoch_begin(self, epoch, logs=None):
        self.start = int(self.model.optimizer.iterations.numpy())

    def on_train_batch_end(self, batch, logs=None):
        counted = int(self.model.optimizer.iterations.numpy()) - self.start
        self.seen.append([adapter(self.model).steps_done(self.model, batch), counted])


class Saves(StepCheckpoint):

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.saves = []

    def save(self, epoch, step):
        self.saves.append([epoch, step, self.global_step(epoch, step)])
        return super().save(epoch, step)


model = keras.Sequential([keras.Input((4, )), keras.layers.Dense(1)])
model.compile("sgd", "mse", steps_per_execution=4)
data = tf.data.Dataset.from_tensor_slices((np.zeros((16, 4), "float32"), np.zeros(
    (16, 1), "float32"))).batch(4).repeat()
watchdog = Watchdog(0, 600.0)
positions, saves = Positions(), Saves(model_dir, True, {}, save_steps=6)
model.fit(data,
          steps_per_epoch=12,
          epochs=2,
          verbose=0,
          callbacks=[WatchdogCallback(watchdog), positions, saves])
with open(out, "w") as f:
    json.dump(
        {
            "keras": keras.__version__,
            "positions": positions.seen,
            "watchdog_steps": watchdog.steps,
            "saves": saves.saves,
            "optimizer_steps": int(model.optimizer.iterations.numpy())
        }, f)
