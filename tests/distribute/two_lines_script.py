"""keras.io's "Simple MNIST convnet" (NumPy arrays, one-hot labels, validation_split), on
scikit-learn's digits, unchanged but for tfdist's two lines (marked). argv: KERAS (2: tf.keras
under TF_USE_LEGACY_KERAS=1, 3: `import keras`), OUT (each rank writes OUT.<rank>.npz: the
replicas in sync, the final weights arr_0.. and the initial ones initial_0..), WHEN (`after`:
the two lines, the model made after tfdist.init() as the script makes it; `scope`: made and
compiled in `with rt.scope()` too; `before`: before init()), then optionally `mirrored`: one
process with 2 logical CPUs (as a node with 2 GPUs) under tfdist.init(strategy="mirrored",
cpu_devices=2), `same_math`: the seeds fixed and the dropout rate 0, so that any number of
workers trains the same math on the global batch (64) as one process, `bn`: a BatchNormalization
layer after the convolution and each worker's samples in its own order (its moving statistics
then differ per worker unless averaged), `epochs=N` (default 2), `dataset`: the training data as
a repeated, shuffled, batched tf.data.Dataset and `steps_per_epoch=20`, no validation (what
ParameterServerStrategy's fit takes: there only the chief runs the script past init()), `jit`:
compiled with `jit_compile=True` (XLA).
OUT.<rank>.npz also holds `epochs_run`, the epochs this fit trained (fewer where it resumed), and
`device`, the device of the model's first variable, and `tf_keras_loaded`, whether anything
imported tf-keras."""

import contextlib
import os
import sys

import numpy as np
from sklearn.datasets import load_digits

KERAS, OUT, WHEN = int(sys.argv[1]), sys.argv[2], sys.argv[3]
MIRRORED, SAME_MATH = "mirrored" in sys.argv[4:], "same_math" in sys.argv[4:]
BN, DATASET = "bn" in sys.argv[4:], "dataset" in sys.argv[4:]
JIT = "jit" in sys.argv[4:]
EPOCHS = int(next((a.split("=")[1] for a in sys.argv[4:] if a.startswith("epochs=")), 2))
if KERAS == 2:
    from tensorflow import keras  # tf-keras: the test exports TF_USE_LEGACY_KERAS=1 (keras_environ)

    assert keras.__name__.startswith("tf_keras"), "TF_USE_LEGACY_KERAS=1 not exported: Keras 3"
else:
    import keras

import tfdist  # noqa: E402  # tfdist

if MIRRORED:  # two devices, as a node with two GPUs has them
    import tensorflow as tf

    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)

num_classes, input_shape = 10, (8, 8, 1)
digits = load_digits()
x = (digits.images / 16.0).astype("float32")[..., None]
y = keras.utils.to_categorical(digits.target, num_classes)
x_train, y_train = x[:1500], y[:1500]
if BN:  # each worker its own order: different batches, different moving statistics
    order = np.random.default_rng(int(os.environ.get("TFDIST_LAUNCH_RANK", "0"))).permutation(1500)
    x_train, y_train = x_train[order], y_train[order]


def make_model():
    return keras.Sequential([
        keras.Input(shape=input_shape),
        keras.layers.Conv2D(16, kernel_size=(3, 3), activation="relu"),
        *([keras.layers.BatchNormalization()] if BN else []),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.0 if SAME_MATH else 0.5),
        keras.layers.Dense(num_classes, activation="softmax"),
    ])


if WHEN == "before":
    model = make_model()
rt = tfdist.init(**(dict(strategy="mirrored", cpu_devices=2) if MIRRORED else {}))  # tfdist
if SAME_MATH:  # the same initial weights and data order in every process
    keras.utils.set_random_seed(1)
if WHEN == "after":
    model = make_model()
with rt.scope() if WHEN == "scope" else contextlib.nullcontext():  # tfdist (`scope`)
    if WHEN == "scope":
        model = make_model()
    model.compile(loss="categorical_crossentropy",
                  optimizer="adam",
                  metrics=["accuracy"],
                  **(dict(jit_compile=True) if JIT else {}))
initial = model.get_weights()
if DATASET:
    import tensorflow as tf

    train = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(1500).repeat().batch(64)
    history = model.fit(train, epochs=EPOCHS, steps_per_epoch=20, verbose=2)
else:
    history = model.fit(x_train,
                        y_train,
                        batch_size=64,
                        epochs=EPOCHS,
                        validation_split=0.1,
                        verbose=2)
rank = os.environ.get("TFDIST_LAUNCH_RANK", "0")
FIRST = model.trainable_variables[0]
np.savez(
    f"{OUT}.{rank}.npz",
    replicas=model.distribute_strategy.num_replicas_in_sync,
    epochs_run=len(history.history["loss"]),
    device=getattr(FIRST, "device", None) or FIRST.value.device,  # Keras 3's: its value's
    tf_keras_loaded="tf_keras" in sys.modules,
    *model.get_weights(),
    **{
        f"initial_{i}": w
        for i, w in enumerate(initial)
    })
