"""Keras 3 (`import keras`) under the mixed_float16 policy with several replicas, where one
replica's gradients overflow float16 and the others' do not: `python mixed_script.py MODE OUT_DIR`.
Each task writes what it saw to OUT_DIR/rank-N.json.

MODE "fit": tfdist's multi_worker strategy (started by `tfdist launch -n 2`); `compile` wraps
the optimizer in Keras's LossScaleOptimizer; in step OVERFLOW_STEP rank 1's batch overflows
(inf gradients on rank 1 only). Written: the loss scale and the first kernel after each step,
the final weights.
MODE "mirrored": the same in one process under tfdist's mirrored strategy over 2 CPU devices;
the overflow is in replica 1's half of the global batch.
MODE "check": tfdist's multi_worker strategy, no training: each rank asks the LossScaleOptimizer
whether its own gradient ([1, 2] on rank 0, [1, inf] on rank 1) is finite.
MODE + "_without" (e.g. "check_without"): the same without tfdist's correction of the
LossScaleOptimizer (undone after the imports).
"""

import json
import os
import sys

import tfdist

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

mode, out_dir = sys.argv[1], sys.argv[2]
if mode.endswith("_without"):
    mode = mode[:-len("_without")]
    lso = keras.optimizers.LossScaleOptimizer
    lso.check_finite = lso.check_finite.__wrapped__

PER_REPLICA_BATCH = 8
STEPS = 6
REPLICAS = 2
OVERFLOW_STEP = 2  # the step whose batch overflows float16 on replica 1


def write(rank, **result):
    with open(os.path.join(out_dir, f"rank-{rank}.json"), "w") as f:
        json.dump(result, f)


def data(rank=None):
    """Step j's batch of replica r is part r of global batch j; replica 1's overflows in one.
    Without `rank`: the global batches, whose parts the replicas take in turn from one pipeline."""
    rng = np.random.default_rng(1234)
    x = rng.normal(size=(STEPS, REPLICAS, PER_REPLICA_BATCH, 5)).astype("float32")
    # Small targets: gradients times Keras's initial loss scale (2**15) stay finite in float16.
    y = (0.05 * x @ np.arange(1, 6, dtype="float32"))[..., None]
    x[OVERFLOW_STEP, 1, 0] = 1e5  # inf in float16
    if rank is None:  # the global batches
        return x.reshape(-1, 5), y.reshape(-1, 1)
    return x[:, rank].reshape(-1, 5), y[:, rank].reshape(-1, 1)


class Record(keras.callbacks.Callback):

    def __init__(self):
        super().__init__()
        self.scales, self.kernels = [], []

    def on_train_batch_end(self, batch, logs=None):
        self.scales.append(float(self.model.optimizer.dynamic_scale.numpy()))
        self.kernels.append(self.model.get_weights()[0].tolist())


def fit(rt, rank):
    x, y = data(None if rt.strategy_name == "mirrored" else rank)
    keras.mixed_precision.set_global_policy("mixed_float16")
    keras.utils.set_random_seed(0)
    with rt.scope():
        model = keras.Sequential([
            keras.Input((5, )),
            keras.layers.Dense(4, activation="tanh"),
            keras.layers.Dense(1, dtype="float32"),
        ])
        model.compile(optimizer=rt.optimizer(keras.optimizers.SGD(0.05)), loss="mse")
    record = Record()
    dataset = rt.dataset(lambda ctx: tf.data.Dataset.from_tensor_slices(
        (x, y)).batch(PER_REPLICA_BATCH).repeat())
    model.fit(dataset, epochs=1, steps_per_epoch=STEPS, verbose=0, callbacks=[record])
    write(rank,
          optimizer=type(model.optimizer).__name__,
          scales=record.scales,
          kernels=record.kernels,
          weights=[w.tolist() for w in model.get_weights()])


def check(rt, rank):
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
    grad = tf.constant([1.0, np.inf if rank == 1 else 2.0])

    @tf.function
    def decide():
        return rt.strategy.run(optimizer.check_finite, args=([grad], ))

    finite = rt.strategy.experimental_local_results(decide())[0]
    write(rank, finite=bool(finite.numpy()))


if mode == "mirrored":
    rt = tfdist.init(strategy="mirrored", cpu_devices=REPLICAS)
    assert rt.num_replicas == REPLICAS, rt.num_replicas
    fit(rt, 0)
else:
    rt = tfdist.init(strategy="multi_worker")
    if mode == "fit":
        fit(rt, rt.rank)
    else:
        check(rt, rt.rank)
rt.shutdown()
