"""A single-device Keras script on scikit-learn's digits, unchanged but for tfdist's two lines
(marked), run under `tfdist launch -n 2 --strategy horovod`. argv: KERAS (2: tf.keras under
TF_USE_LEGACY_KERAS=1, 3: `import keras`), OUT (each rank writes OUT.<kind>.<rank>.npz), KINDS
(comma-separated, one model trained after the other in one process: `arrays`: NumPy arrays with
validation_split; `dataset`: batched tf.data datasets for fit and validation_data; `own`: the
arrays with Horovod's own lines kept, hvd.DistributedOptimizer and its callbacks, the arrays split
per rank by the script, with the per-rank batch), MODE (`two_lines`; `single`: one plain process
without tfdist).

Seeds fixed, SGD, shuffle=False: any number of ranks trains the math of one process on the
global batch (64). A `Count` layer (the test's instrument, not part of the script) counts the
samples the model saw in training and in validation; OUT.<rank>.npz holds the counts at each
epoch's end, the weights (arr_0..), the trainable ones (trainable_0..), the losses and the class
names of the optimizer's MRO."""

import os
import sys

import numpy as np
from sklearn.datasets import load_digits

KERAS, OUT, KINDS, MODE = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(","), sys.argv[4]
if KERAS == 2:
    from tensorflow import keras  # tf-keras: the test exports TF_USE_LEGACY_KERAS=1 (keras_environ)

    assert keras.__name__.startswith("tf_keras"), "TF_USE_LEGACY_KERAS=1 not exported: Keras 3"
else:
    import keras
import tensorflow as tf  # noqa: E402

if MODE != "single":
    import tfdist  # tfdist

    tfdist.init()  # tfdist
if "own" in KINDS:
    import horovod.tensorflow.keras as hvd

digits = load_digits()
x = (digits.images / 16.0).astype("float32")[..., None]
y = keras.utils.to_categorical(digits.target, 10)
# 1501 samples: validation_split=0.1 leaves 1350 to train (21 global batches of 64, and 6) and
# 151 to validate (2 of 64, and 23: one sample no rank can take with the other's count).
x, y = x[:1501], y[:1501]


class Count(keras.layers.Layer):
    """The samples this model saw, in training and in evaluation (the test's instrument)."""

    def build(self, shape):
        self.seen = self.add_weight(name="seen", shape=(), initializer="zeros", trainable=False)
        self.evaluated = self.add_weight(name="evaluated",
                                         shape=(),
                                         initializer="zeros",
                                         trainable=False)

    def call(self, inputs, training=None):
        rows = tf.cast(tf.shape(inputs)[0], "float32")
        counter = self.seen if training else self.evaluated
        counter.assign_add(rows)
        return inputs


class Counts(keras.callbacks.Callback):

    def __init__(self, layer):
        super().__init__()
        self.layer, self.at_epoch_end = layer, []

    def on_epoch_end(self, epoch, logs=None):
        self.at_epoch_end.append(
            [float(self.layer.seen.numpy()),
             float(self.layer.evaluated.numpy())])


def train(kind):
    """One model trained on `kind`'s input (the script's; the rest is the test's)."""
    keras.utils.set_random_seed(1)
    count = Count()
    model = keras.Sequential([
        keras.Input(shape=(8, 8, 1)),
        count,
        keras.layers.Conv2D(8, kernel_size=(3, 3), activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(10, activation="softmax"),
    ])
    optimizer = keras.optimizers.SGD(0.1)
    callbacks = [Counts(count)]
    batch_size, xs, ys = 64, x, y
    if kind == "own":  # Horovod's own lines, as its examples write them
        optimizer = hvd.DistributedOptimizer(optimizer)
        callbacks = [
            hvd.callbacks.BroadcastGlobalVariablesCallback(0),
            hvd.callbacks.MetricAverageCallback()
        ] + callbacks
        batch_size = 64 // hvd.size()
        xs, ys = x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()]
    model.compile(loss="categorical_crossentropy", optimizer=optimizer, metrics=["accuracy"])
    if kind == "dataset":
        train = tf.data.Dataset.from_tensor_slices((xs[:1350], ys[:1350])).batch(batch_size)
        val = tf.data.Dataset.from_tensor_slices((xs[1350:], ys[1350:])).batch(batch_size)
        history = model.fit(train, epochs=2, validation_data=val, callbacks=callbacks, verbose=2)
    else:
        history = model.fit(xs,
                            ys,
                            batch_size=batch_size,
                            epochs=2,
                            validation_split=0.1,
                            shuffle=False,
                            callbacks=callbacks,
                            verbose=2)
    rank = os.environ.get("TFDIST_LAUNCH_RANK", "0")
    np.savez(f"{OUT}.{kind}.{rank}.npz",
             counts=np.array(callbacks[-1].at_epoch_end),
             loss=np.array(history.history["loss"]),
             val_loss=np.array(history.history["val_loss"]),
             mro=np.array([c.__name__ for c in type(model.optimizer).__mro__]),
             *model.get_weights(),
             **{
                 f"trainable_{i}": np.asarray(w)
                 for i, w in enumerate(model.trainable_weights)
             })


for kind in KINDS:
    train(kind)
