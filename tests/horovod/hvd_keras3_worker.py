"""One task of the Horovod tests with Keras 3 (`import keras`): `python hvd_keras3_worker.py MODE
OUT_JSON`, started as tests/horovod/helpers.start_task starts hvd_worker.py.

MODE "train": tfdist.init(strategy="horovod"), a tiny Keras 3 model trained with
rt.optimizer(keras.optimizers.SGD) and the engine's callbacks (broadcast, metric averaging); each
rank starts from different weights (seed = rank), so only the broadcast makes them agree.
MODE "train0": the same with every rank starting from the weights of seed 0 (as "single").
MODE "single": the same model and data in one process with the global batch.
MODE "accum" / "single_accum": "train0" / "single" with Keras's own gradient accumulation
(SGD(gradient_accumulation_steps=ACCUMULATE)), what tfdist advises instead of Horovod's
backward_passes_per_step.
MODE "hvd_api": Horovod's Keras API used directly, as its examples do (hvd.DistributedOptimizer,
BroadcastGlobalVariablesCallback, MetricAverageCallback, LearningRateWarmupCallback, a rank-0
ModelCheckpoint), with a Keras 3 SGD with momentum.
MODE "loop": a custom training loop (GradientTape + optimizer.apply_gradients in a tf.function).
MODE "mixed": the mixed_float16 policy (compile wraps the optimizer in a LossScaleOptimizer); in
one step rank 1's batch overflows float16 (inf gradients on rank 1 only).
"""

import json
import os
import sys

import tfdist  # noqa: F401  (before TensorFlow, as a user script starts)

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import horovod.tensorflow.keras as hvd  # noqa: E402  (as Horovod's examples import it)

PER_RANK_BATCH = 8
STEPS = 6
WORLD = 2
OVERFLOW_STEP = 2  # "mixed": the step whose batch overflows float16 on rank 1
ACCUMULATE = 3  # "accum": the steps whose gradients each update averages


def data():
    rng = np.random.default_rng(1234)
    x = rng.normal(size=(PER_RANK_BATCH * WORLD * STEPS, 5)).astype("float32")
    y = (x @ np.arange(1, 6, dtype="float32") + 0.5)[:, None]
    return x, y


def model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([
        keras.Input((5, )),
        keras.layers.Dense(4, activation="tanh"),
        keras.layers.Dense(1),
    ])


def shard(a, rank):
    """Rank r's batch j is the r-th half of global batch j (as in hvd_worker.py)."""
    steps = a.reshape(STEPS, WORLD, PER_RANK_BATCH, *a.shape[1:])
    return steps[:, rank].reshape(-1, *a.shape[1:])


def weights(net):
    return [w.tolist() for w in net.get_weights()]


class Record(keras.callbacks.Callback):
    """The learning rate each batch saw; the loss scale and first kernel after each batch (mixed
    precision)."""

    def __init__(self):
        super().__init__()
        self.lrs, self.scales, self.kernels = [], [], []

    def on_train_batch_begin(self, batch, logs=None):
        self.lrs.append(float(self.model.optimizer.learning_rate.numpy()))

    def on_train_batch_end(self, batch, logs=None):
        scale = getattr(self.model.optimizer, "dynamic_scale", None)
        if scale is not None:
            self.scales.append(float(scale.numpy()))
            self.kernels.append(self.model.get_weights()[0].tolist())


def sgd(mode):
    accumulate = ACCUMULATE if mode.endswith("accum") else None
    return keras.optimizers.SGD(0.05, gradient_accumulation_steps=accumulate)


def main(mode, out):
    x, y = data()
    result = {"mode": mode}
    if mode in ("single", "single_accum"):
        net = model(seed=0)
        net.compile(optimizer=sgd(mode), loss="mse", metrics=["mae"])
        hist = net.fit(x, y, batch_size=PER_RANK_BATCH * WORLD, epochs=2, shuffle=False, verbose=0)
        result.update(weights=weights(net), history=hist.history)
        json.dump(result, open(out, "w"), default=float)
        return

    rt = tfdist.init(strategy="horovod")
    rank = hvd.rank()
    result.update(rank=rank, size=hvd.size())
    xs, ys = shard(x, rank), shard(y, rank)
    record = Record()
    if mode in ("train", "train0", "accum"):
        net = model(seed=rank if mode == "train" else 0)
        result["initial_weights"] = weights(net)
        opt = rt.optimizer(sgd(mode))
        result["optimizer_class"] = type(opt).__name__
        net.compile(optimizer=opt, loss="mse", metrics=["mae"])
        hist = net.fit(xs,
                       ys,
                       batch_size=PER_RANK_BATCH,
                       epochs=2,
                       shuffle=False,
                       verbose=0,
                       callbacks=rt.engine.callbacks())
    elif mode == "hvd_api":
        net = model(seed=rank)
        opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9),
                                       backward_passes_per_step=1,
                                       average_aggregated_gradients=True)
        net.compile(optimizer=opt, loss="mse", metrics=["mae"])
        callbacks = [
            hvd.callbacks.BroadcastGlobalVariablesCallback(0),
            hvd.callbacks.MetricAverageCallback(),
            hvd.callbacks.LearningRateWarmupCallback(initial_lr=0.1, warmup_epochs=2, verbose=1),
            record,
        ]
        if rank == 0:
            callbacks.append(
                keras.callbacks.ModelCheckpoint(os.path.join(os.path.dirname(out), "ckpt.keras")))
        hist = net.fit(xs,
                       ys,
                       batch_size=PER_RANK_BATCH,
                       epochs=3,
                       shuffle=False,
                       verbose=0,
                       callbacks=callbacks)
        result["lrs"] = record.lrs
    elif mode == "loop":
        net = model(seed=0)
        opt = hvd.DistributedOptimizer(keras.optimizers.Adam(0.01))
        loss_fn = keras.losses.MeanSquaredError()

        @tf.function
        def step(xb, yb):
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, net(xb, training=True))
            grads = tape.gradient(loss, net.trainable_variables)
            opt.apply_gradients(zip(grads, net.trainable_variables))
            return loss

        for i in range(STEPS):
            sl = slice(i * PER_RANK_BATCH, (i + 1) * PER_RANK_BATCH)
            step(tf.constant(xs[sl]), tf.constant(ys[sl]))
        hist = None
    elif mode == "mixed":
        keras.mixed_precision.set_global_policy("mixed_float16")
        net = model(seed=0)
        # Small targets: gradients times the initial loss scale (2**15) stay finite in float16
        ys = ys * 0.05
        if rank == 1:  # float16 overflows in this batch: inf gradients on this rank only
            xs[OVERFLOW_STEP * PER_RANK_BATCH] = 1e5
        net.compile(optimizer=rt.optimizer(keras.optimizers.SGD(0.05)), loss="mse")
        result["optimizer_class"] = type(net.optimizer).__name__
        hist = net.fit(xs,
                       ys,
                       batch_size=PER_RANK_BATCH,
                       epochs=1,
                       shuffle=False,
                       verbose=0,
                       callbacks=[record])
        result.update(scales=record.scales, kernels=record.kernels)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    hvd.allreduce(tf.constant(0.0), name="end")  # every rank is done before any exits
    result["weights"] = weights(net)
    if hist is not None:
        result["history"] = {k: [float(v) for v in vs] for k, vs in hist.history.items()}
    json.dump(result, open(out.replace("{rank}", str(rank)), "w"), default=float)
    rt.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
