"""A Keras script with only tfdist's two lines (marked) that records which training samples each
replica trains on, per epoch. argv: KERAS (2: tf.keras under TF_USE_LEGACY_KERAS=1, 3: `import
keras`), OUT (each rank writes OUT.<rank>.json), INPUT (`numpy`: `model.fit(x, y, batch_size=64,
epochs=2, validation_split=0.1)` as keras.io writes it; `dataset`: a batched tf.data.Dataset the
script builds itself, `from_tensor_slices((x, y)).shuffle(...).batch(64)`, and its validation
part as `validation_data`), then optionally `mirrored`: one process with 2 logical CPUs under
tfdist.init(strategy="mirrored", cpu_devices=2), and `seed_rank0`: rank 0's script alone sets a
global seed (1234) before tfdist.init(). The strategy otherwise is the launcher's (`tfdist launch
--strategy=...`).

The count: every sample of scikit-learn's digits (1797) carries its index as one more input
column. The model's first layer (Recorder) drops that column and, in training calls only, hands
the ids of the batch it was given to a tf.numpy_function that appends them to a per-process list
keyed by epoch and replica: it sees exactly the batches the train step feeds the model (it is
part of the model), and nothing of validation (there `training` is False). OUT.<rank>.json:
{"replicas": N, "ids": {epoch: {replica: [ids in the order trained]}}, "steps": {epoch:
{replica: train steps}}}.
"""

import collections
import json
import os
import sys
import threading

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

KERAS, OUT, INPUT = int(sys.argv[1]), sys.argv[2], sys.argv[3]
MIRRORED = "mirrored" in sys.argv[4:]
RANK = os.environ.get("TFDIST_LAUNCH_RANK", "0")
if "seed_rank0" in sys.argv[4:] and RANK == "0":
    tf.random.set_seed(1234)
if KERAS == 2:
    from tensorflow import keras  # tf-keras: the test exports TF_USE_LEGACY_KERAS=1
else:
    import keras

import tfdist  # noqa: E402  # tfdist

if MIRRORED:  # two devices, as a node with two GPUs has them
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)

EPOCH = [0]  # set by the callback before each epoch's first step
IDS = collections.defaultdict(lambda: collections.defaultdict(list))  # epoch -> replica -> ids
STEPS = collections.defaultdict(collections.Counter)  # epoch -> replica -> train calls
LOCK = threading.Lock()  # mirrored: the replicas' calls run in threads of their own


def record(ids, replica):
    with LOCK:
        IDS[EPOCH[0]][int(replica)].extend(int(i) for i in ids)
        STEPS[EPOCH[0]][int(replica)] += 1
    return np.int32(0)


class Recorder(keras.layers.Layer):
    """The input less its last column (the sample's id); in a training call, the ids recorded."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_jit = False  # a numpy_function cannot be compiled by XLA (Keras 3's "auto")

    def call(self, inputs, training=None):
        features = inputs[:, :-1]
        if not training:
            return features
        context = tf.distribute.get_replica_context()
        replica = context.replica_id_in_sync_group if context is not None else 0
        ids = tf.cast(tf.round(inputs[:, -1]), tf.int64)
        done = tf.numpy_function(record, [ids, replica], tf.int32, stateful=True)
        with tf.control_dependencies([done]):
            return tf.identity(features)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[1] - 1)


class Epoch(keras.callbacks.Callback):

    def on_epoch_begin(self, epoch, logs=None):
        EPOCH[0] = epoch


digits = load_digits()
n = len(digits.target)
x = np.concatenate([digits.data / 16.0, np.arange(n)[:, None]], axis=1).astype("float32")
y = digits.target.astype("int64")

rt = tfdist.init(**(dict(strategy="mirrored", cpu_devices=2) if MIRRORED else {}))  # tfdist
model = keras.Sequential([
    keras.Input(shape=(x.shape[1], )),
    Recorder(),
    keras.layers.Dense(32, activation="relu"),
    keras.layers.Dense(10, activation="softmax"),
])
model.compile(loss="sparse_categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
if INPUT == "numpy":
    model.fit(x, y, batch_size=64, epochs=2, validation_split=0.1, callbacks=[Epoch()], verbose=2)
else:
    cut = int(n * 0.9)  # the samples validation_split=0.1 would train on
    train = tf.data.Dataset.from_tensor_slices((x[:cut], y[:cut])).shuffle(1024).batch(64)
    validation = tf.data.Dataset.from_tensor_slices((x[cut:], y[cut:])).batch(64)
    model.fit(train, epochs=2, validation_data=validation, callbacks=[Epoch()], verbose=2)

with open(f"{OUT}.{RANK}.json", "w") as f:
    json.dump(
        {
            "replicas": rt.num_replicas,  # Horovod: its ranks; a TF strategy: its replicas
            "ids": {
                e: dict(r)
                for e, r in IDS.items()
            },
            "steps": {
                e: dict(r)
                for e, r in STEPS.items()
            },
        },
        f)
