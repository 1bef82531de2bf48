"""Record the learning rate applied in every step under warmup; argv: STRATEGY OUT.json

The rate is read from the update itself, not from `optimizer.learning_rate`: that property
differs between the Kerases after a step (tf-keras: the rate just applied; Keras 3: the schedule
at the incremented `iterations`, the next step's rate). The model is one weight w, predicting
w * x with x = 1 and trained on the prediction itself as the loss, so the gradient of the
global batch's mean loss is exactly 1, and plain SGD from w = 0 ends the step at w = -rate."""

import json
import sys

import numpy as np

import tfdist
import tensorflow as tf  # tf.keras: the Keras the test's TF_USE_LEGACY_KERAS names
from tfdist.app.config import TrainConfig
from tfdist.app.schedules import learning_rate

STEPS_PER_EPOCH, EPOCHS = 6, 2


class RecordAppliedRate(tf.keras.callbacks.Callback):

    def __init__(self, weight):
        super().__init__()
        self.weight, self.rates = weight, []

    def on_train_batch_begin(self, batch, logs=None):
        # w = 0 before each step, so that w after it is the step's own update, exactly.
        self.weight.assign(np.zeros(self.weight.shape, "float32"))

    def on_train_batch_end(self, batch, logs=None):
        self.rates.append(-float(np.asarray(self.weight.numpy()).item()))


def main(strategy, out):
    rt = tfdist.init(strategy=strategy)
    cfg = TrainConfig(lr=0.1, warmup_epochs=1.5, epochs=EPOCHS)  # cfg.keras: tf.keras's
    x, y = np.ones((256, 1), "float32"), np.zeros((256, ), "float32")

    def input_fn(ctx):
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shard(ctx.num_input_pipelines,
                                                              ctx.input_pipeline_id)
        return ds.batch(8).repeat()

    with rt.scope():
        dense = tf.keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")
        model = tf.keras.Sequential([tf.keras.layers.Input((1, )), dense])
        opt = tf.keras.optimizers.SGD(learning_rate(cfg, rt.scale_lr(cfg.lr), STEPS_PER_EPOCH))
        model.compile(rt.optimizer(opt), lambda y_true, y_pred: y_pred[:, 0])
    recorder = RecordAppliedRate(dense.kernel)
    model.fit(rt.dataset(input_fn),
              epochs=EPOCHS,
              steps_per_epoch=STEPS_PER_EPOCH,
              verbose=0,
              callbacks=rt.callbacks() + [recorder])
    with open(f"{out}.{rt.rank}", "w") as f:
        json.dump({"rates": recorder.rates, "replicas": rt.num_replicas, "keras": cfg.keras}, f)
    rt.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
