"""Record the learning rate of every step under warmup; argv: STRATEGY OUT.json"""

import json
import sys

import numpy as np

import tfdist
import tensorflow as tf
from tfdist.app.config import TrainConfig
from tfdist.app.schedules import learning_rate

STEPS_PER_EPOCH, EPOCHS = 6, 2


class RecordLR(tf.keras.callbacks.Callback):

    def __init__(self):
        super().__init__()
        self.rates = []

    def on_train_batch_end(self, batch, logs=None):
        # The rate the optimizer applied in the step just taken.
        self.rates.append(float(tf.keras.backend.get_value(self.model.optimizer.learning_rate)))


def main(strategy, out):
    rt = tfdist.init(strategy=strategy)
    cfg = TrainConfig(lr=0.1, warmup_epochs=1.5, epochs=EPOCHS)
    x = np.random.RandomState(0).rand(256, 4).astype("float32")
    y = (x.sum(axis=1) > 2).astype("int64")

    def input_fn(ctx):
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shard(ctx.num_input_pipelines,
                                                              ctx.input_pipeline_id)
        return ds.batch(8).repeat()

    with rt.scope():
        model = tf.keras.Sequential([tf.keras.layers.Input((4, )), tf.keras.layers.Dense(2)])
        opt = tf.keras.optimizers.SGD(learning_rate(cfg, rt.scale_lr(cfg.lr), STEPS_PER_EPOCH))
        model.compile(rt.optimizer(opt),
                      tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    recorder = RecordLR()
    model.fit(rt.dataset(input_fn),
              epochs=EPOCHS,
              steps_per_epoch=STEPS_PER_EPOCH,
              verbose=0,
              callbacks=rt.callbacks() + [recorder])
    with open(f"{out}.{rt.rank}", "w") as f:
        json.dump({"rates": recorder.rates, "replicas": rt.num_replicas}, f)
    rt.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
