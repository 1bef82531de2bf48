"""A single-device Keras script with tfdist's two lines and `weak_scaling=True`, one process with
2 logical CPUs under `mirrored` (as a node with 2 GPUs). argv: KERAS (2: tf.keras under
TF_USE_LEGACY_KERAS=1, 3: `import keras`). Prints one `weak_scaling: {...}` line: the rate the
optimizer trains with, the steps of an epoch of 1280 samples at batch_size=32, and what fit said
of a tf.data.Dataset."""

import json
import sys

import numpy as np

if sys.argv[1] == "2":
    from tensorflow import keras  # tf-keras: the test exports TF_USE_LEGACY_KERAS=1 (keras_environ)

    assert keras.__name__.startswith("tf_keras"), "TF_USE_LEGACY_KERAS=1 not exported: Keras 3"
else:
    import keras
import tensorflow as tf

import tfdist  # noqa: E402  # tfdist

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)
tfdist.init(strategy="mirrored", cpu_devices=2, weak_scaling=True)  # tfdist

x = np.random.default_rng(0).normal(size=(1280, 8)).astype("float32")
y = (x.sum(axis=1) > 0).astype("float32")
model = keras.Sequential([keras.Input((8, )), keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer=keras.optimizers.SGD(0.1), loss="binary_crossentropy")
model.compile(optimizer=model.optimizer, loss="binary_crossentropy")  # again: scaled once


class Steps(keras.callbacks.Callback):
    steps = None

    def on_train_begin(self, logs=None):
        Steps.steps = self.params["steps"]


model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=[Steps()])
try:
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(32), epochs=1, verbose=0)
    refused = None
except Exception as e:  # noqa: BLE001 - printed for the test to read
    refused = f"{type(e).__name__}: {e}"
print("weak_scaling: " + json.dumps(
    dict(rate=float(model.optimizer.learning_rate.numpy()), steps=Steps.steps, refused=refused)),
      flush=True)
