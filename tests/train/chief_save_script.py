"""A Keras script that saves on the chief only, unchanged but for tfdist's two lines (marked): after
`fit`, `if rank == 0: model.save(...)` and `model.save_weights(...)`. argv: KERAS (2: tf.keras under
TF_USE_LEGACY_KERAS=1, 3: `import keras`), SHARED (the directory the chief saves to), OUT (each rank
writes OUT.<rank>.npz: its weights after fit, and what it did after), then what the other worker
does after fit: `exit` (nothing: it ends while the chief saves) or `evaluate` (every rank evaluates
after the chief's saves), or `savedmodel` (tf-keras: the chief alone saves a SavedModel to
SHARED/final, the other worker ends). The model's BatchNormalization keeps statistics of each
worker's own batches (tf-keras: on-read variables). `load` instead of training: load SHARED's
files with plain Keras (no tfdist) and write their weights to OUT.loaded.npz."""

import os
import sys

import numpy as np
from sklearn.datasets import load_digits

KERAS, SHARED, OUT, WHAT = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
if KERAS == 2:
    from tensorflow import keras  # tf-keras: the test exports TF_USE_LEGACY_KERAS=1 (keras_environ)

    assert keras.__name__.startswith("tf_keras"), "TF_USE_LEGACY_KERAS=1 not exported: Keras 3"
else:
    import keras


def make_model():
    keras.utils.set_random_seed(1)
    return keras.Sequential([
        keras.Input(shape=(64, )),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.BatchNormalization(),  # statistics of each worker's own batches
        keras.layers.Dense(10, activation="softmax"),
    ])


if WHAT == "load":  # a new program, without tfdist
    assert "tfdist" not in sys.modules
    whole = keras.models.load_model(os.path.join(SHARED, "final.keras"))
    weights_only = make_model()
    weights_only.load_weights(os.path.join(SHARED, "final.weights.h5"))
    np.savez(f"{OUT}.loaded.npz", *whole.get_weights(), *weights_only.get_weights())
    sys.exit(0)

import tfdist  # noqa: E402  # tfdist

tfdist.init()  # tfdist
rank = int(os.environ.get("TFDIST_LAUNCH_RANK", "0"))

digits = load_digits()
x = (digits.images / 16.0).astype("float32").reshape(-1, 64)[:512]
y = digits.target[:512]
model = make_model()
model.compile(loss="sparse_categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(x, y, batch_size=64, epochs=1, verbose=0)
np.savez(f"{OUT}.{rank}.npz", *model.get_weights())
if rank == 0 and WHAT == "savedmodel":
    model.save(os.path.join(SHARED, "final"))
elif rank == 0:
    model.save(os.path.join(SHARED, "final.keras"))
    model.save_weights(os.path.join(SHARED, "final.weights.h5"))
if WHAT == "evaluate":
    loss, accuracy = model.evaluate(x, y, verbose=0)
    np.save(f"{OUT}.{rank}.evaluate.npy", [loss, accuracy])
