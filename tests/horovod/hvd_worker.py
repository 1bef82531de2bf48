"""One task of the Horovod tests, run as a script: `python hvd_worker.py MODE OUT_JSON`.

MODE "train": the Horovod engine from the environment (what `tfdist launch` sets), then a tiny
tf_keras model trained a few steps with the engine's optimizer and callbacks. Each rank starts from
different initial weights (seed = rank): only the broadcast from rank 0 makes them agree.
MODE "train0": the same with every rank starting from the weights of seed 0 (as "single").
MODE "single": the same model and data in one process with the global batch, weights of rank 0.
OUT_JSON may hold "{rank}", replaced by the Horovod rank.
MODE "init": the engine's set-up only (for the tests of a missing peer).
MODE "long": trains "forever", printing "EPOCH rank n" (for the test of a lost peer).
"""

import json
import os
import sys
import time

import tfdist  # noqa: F401  (as a user script starts; the model below is tf_keras)
from tfdist.cluster import build_roles, detect

PER_RANK_BATCH = 8
STEPS = 6
WORLD = 2


def data():
    import numpy as np

    rng = np.random.default_rng(1234)
    x = rng.normal(size=(PER_RANK_BATCH * WORLD * STEPS, 5)).astype("float32")
    y = (x @ np.arange(1, 6, dtype="float32") + 0.5)[:, None]
    return x, y


def model(seed):
    import tf_keras

    tf_keras.utils.set_random_seed(seed)
    return tf_keras.Sequential([
        tf_keras.layers.Dense(4, activation="tanh", input_shape=(5, )),
        tf_keras.layers.Dense(1),
    ])


def shard(a, rank):
    """Rank r's batch j is the r-th half of global batch j, so one worker with the global batch
    sees the same samples in every step."""
    steps = a.reshape(STEPS, WORLD, PER_RANK_BATCH, *a.shape[1:])
    return steps[:, rank].reshape(-1, *a.shape[1:])


def train_forever(engine, x, y):
    import tf_keras

    class Tick(tf_keras.callbacks.Callback):

        def on_epoch_end(self, epoch, logs=None):
            print("EPOCH", engine.rank, epoch, flush=True)

    net = model(seed=0)
    net.compile(optimizer=engine.wrap_optimizer(tf_keras.optimizers.SGD(0.01)), loss="mse")
    net.fit(x,
            y,
            batch_size=PER_RANK_BATCH,
            epochs=10**6,
            verbose=0,
            callbacks=engine.callbacks() + [Tick()])


def main(mode, out):
    import tf_keras

    start = time.monotonic()
    x, y = data()
    result = {"mode": mode}
    if mode == "single":
        net = model(seed=0)
        net.compile(optimizer=tf_keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
        hist = net.fit(x, y, batch_size=PER_RANK_BATCH * WORLD, epochs=2, shuffle=False, verbose=0)
    else:
        from tfdist.distribute.horovod_engine import HorovodEngine

        cluster = detect()
        engine = HorovodEngine(cluster, build_roles(cluster, "horovod"))
        hvd = engine.hvd
        result.update(rank=hvd.rank(),
                      size=hvd.size(),
                      local=[hvd.local_rank(), hvd.local_size()],
                      cross=[hvd.cross_rank(), hvd.cross_size()],
                      host=cluster.host,
                      gloo_iface=os.environ.get("HOROVOD_GLOO_IFACE"),
                      init_s=time.monotonic() - start)
        out = out.replace("{rank}", str(hvd.rank()))
        if mode == "init":
            engine.shutdown()
            json.dump(result, open(out, "w"))
            return
        rank = hvd.rank()
        if mode == "long":
            train_forever(engine, x, y)
        net = model(seed=0 if mode == "train0" else rank)
        result["initial_weights"] = [w.tolist() for w in net.get_weights()]
        opt = engine.wrap_optimizer(tf_keras.optimizers.SGD(0.05))
        net.compile(optimizer=opt, loss="mse", metrics=["mae"])
        ctx = engine.input_context()
        result["input_context"] = [ctx.num_input_pipelines, ctx.input_pipeline_id]
        hist = net.fit(shard(x, rank),
                       shard(y, rank),
                       batch_size=PER_RANK_BATCH,
                       epochs=2,
                       shuffle=False,
                       verbose=0,
                       callbacks=engine.callbacks())
        engine.barrier()
        engine.shutdown()
    result["weights"] = [w.tolist() for w in net.get_weights()]
    result["history"] = {k: [float(v) for v in vs] for k, vs in hist.history.items()}
    result["seconds"] = time.monotonic() - start
    json.dump(result, open(out, "w"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
