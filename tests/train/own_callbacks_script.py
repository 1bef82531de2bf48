"""A Keras script with Keras's own writing callbacks and saves, unchanged but for tfdist's two
lines (marked). argv: KERAS (2: tf.keras under TF_USE_LEGACY_KERAS=1, 3: `import keras`), SHARED
(the directory every rank's paths name, as on a shared file system), OUT (each rank writes
OUT.<rank>.npz: its final weights, the epochs it ran, its logs per epoch), then optionally
`crash` (every rank exits with status 3 in the second epoch's first step: the first epoch's
callbacks done on every rank; a re-run resumes from BackupAndRestore's backup) or `interrupt`
(the same stop by an exception in both ranks, then the script calls fit again, which resumes
from the backup: one process start instead of two; OUT.<rank>.npz says whether the backup was
there in between). After its saves the
chief loads each saved file as a new program would (in a thread of its own: no strategy there)
and writes what it found to OUT.check.json.
Each rank trains on its own samples (rank 1's are another part of digits), so a callback that
reads a rank's own metrics would see other numbers on each rank."""

import os
import sys

import numpy as np
from sklearn.datasets import load_digits

KERAS, SHARED, OUT = int(sys.argv[1]), sys.argv[2], sys.argv[3]
CRASH, INTERRUPT = "crash" in sys.argv[4:], "interrupt" in sys.argv[4:]
if KERAS == 2:
    from tensorflow import keras  # tf-keras: the test exports TF_USE_LEGACY_KERAS=1 (keras_environ)

    assert keras.__name__.startswith("tf_keras"), "TF_USE_LEGACY_KERAS=1 not exported: Keras 3"
else:
    import keras

join = os.path.join


def check(final):
    """Load each saved file; compare its weights with `final`, the chief's."""
    import json

    found = {
        "files":
        sorted(os.path.relpath(join(d, f), SHARED) for d, _, fs in os.walk(SHARED) for f in fs)
    }
    for name in ("final.keras", "every.keras", "final.weights.h5", "best.weights.h5"):
        if name.endswith(".keras"):
            loaded = keras.models.load_model(join(SHARED, name))
        else:
            loaded = make_model()
            loaded.load_weights(join(SHARED, name))
        weights = loaded.get_weights()
        found[name] = len(weights) == len(final) and all(
            np.array_equal(w, f) for w, f in zip(weights, final))
    with open(f"{OUT}.check.json", "w") as f:
        json.dump(found, f)


def make_model():
    keras.utils.set_random_seed(1)
    return keras.Sequential([
        keras.Input(shape=(64, )),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])


import tfdist  # noqa: E402  # tfdist

rt = tfdist.init()  # tfdist
rank = int(os.environ.get("TFDIST_LAUNCH_RANK", "0"))

digits = load_digits()
x = (digits.images / 16.0).astype("float32").reshape(-1, 64)
y = digits.target
local = slice(0, 800) if rank == 0 else slice(800, 1600)  # other samples on each rank
x_train, y_train = x[local], y[local]

model = make_model()
model.compile(loss="sparse_categorical_crossentropy",
              optimizer=keras.optimizers.SGD(0.05),
              metrics=["accuracy"])


class Record(keras.callbacks.Callback):
    """Each epoch's logs, and (`crash`, `interrupt`) the stop in the second epoch."""

    def __init__(self):
        super().__init__()
        self.epochs, self.logs = [], []
        self.interrupt = INTERRUPT

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append(epoch)
        self.logs.append([float(logs[k]) for k in sorted(logs) if k not in ("lr", "learning_rate")])

    def on_train_batch_end(self, batch, logs=None):
        # Past the second epoch's first all-reduce: every rank ended the first epoch's callbacks.
        if CRASH and len(self.epochs) == 1:
            sys.stdout.flush()
            os._exit(3)
        if self.interrupt and len(self.epochs) == 1:
            self.interrupt = False
            raise Interrupted


class Interrupted(Exception):
    pass


record = Record()
callbacks = [
    keras.callbacks.BackupAndRestore(join(SHARED, "backup")),
    keras.callbacks.ModelCheckpoint(join(SHARED, "every.keras")),
    keras.callbacks.ModelCheckpoint(join(SHARED, "best.weights.h5"),
                                    save_weights_only=True,
                                    save_best_only=True,
                                    monitor="val_loss"),
    keras.callbacks.TensorBoard(join(SHARED, "tb")),
    keras.callbacks.CSVLogger(join(SHARED, "log.csv")),
    keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=0, min_delta=1e9),
    keras.callbacks.EarlyStopping(monitor="val_loss", patience=1, min_delta=0.1),
    record,
]


def fit():
    model.fit(x_train,
              y_train,
              batch_size=64,
              epochs=5,
              validation_split=0.2,
              verbose=2,
              callbacks=callbacks)


backup_left = False
if INTERRUPT:
    try:
        fit()
    except Interrupted:
        backup_left = os.path.isdir(join(SHARED, "backup"))
        record.epochs, record.logs = [], []
fit()
model.save(join(SHARED, "final.keras"))
model.save_weights(join(SHARED, "final.weights.h5"))
np.savez(f"{OUT}.{rank}.npz",
         epochs=np.array(record.epochs),
         backup_left=backup_left,
         logs=np.array(record.logs),
         lr=float(model.optimizer.learning_rate.numpy()),
         *model.get_weights())
if rank == 0:
    import threading

    checker = threading.Thread(target=check, args=(model.get_weights(), ))
    checker.start()
    checker.join()
