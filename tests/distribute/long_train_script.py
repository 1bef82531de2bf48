"""Train "forever" (until killed); print TRAINING once steps run. argv: STRATEGY [DIE_AT_STEP]

With DIE_AT_STEP, rank 1 kills itself with SIGKILL at that step (a node's task dying).
"""

import os
import signal
import sys

import numpy as np

import tfdist
import tensorflow as tf


class Progress(tf.keras.callbacks.Callback):

    def __init__(self, rank, die_at):
        super().__init__()
        self.rank, self.die_at, self.step = rank, die_at, 0

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.step == 5:
            print("TRAINING", flush=True)
        if self.die_at and self.rank == 1 and self.step == self.die_at:
            os.kill(os.getpid(), signal.SIGKILL)


def main(strategy, die_at="0"):
    rt = tfdist.init(strategy=strategy)
    x = np.random.RandomState(0).rand(4096, 64).astype("float32")
    y = (x.sum(axis=1) > 32).astype("int64")

    def input_fn(ctx):
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        return ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(32).repeat()

    with rt.scope():
        model = tf.keras.Sequential([
            tf.keras.layers.Input((64, )),
            tf.keras.layers.Dense(256, activation="relu"),
            tf.keras.layers.Dense(2)
        ])
        model.compile(rt.optimizer(tf.keras.optimizers.SGD(0.01)),
                      tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(rt.dataset(input_fn),
              epochs=10000,
              steps_per_epoch=50,
              verbose=0,
              callbacks=rt.callbacks() + [Progress(rt.rank, int(die_at))])


if __name__ == "__main__":
    main(*sys.argv[1:])
