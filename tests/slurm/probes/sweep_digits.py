"""A user's own absl training script, as `tfdist sweep` runs it in tests/slurm/test_sweep_jobs.py:
a small CNN on digits with tfdist's lines, MODEL_DIR from the environment (the batch scripts set
it to the element's run directory). --tag changes nothing (two elements that train alike); with
--fail_marker naming a file that exists, the script crashes after its first epoch's checkpoint,
as a user's bug or a broken node would, and a resubmitted run resumes there."""

import os

import numpy as np
from absl import app, flags
from sklearn.datasets import load_digits

import tfdist
import tensorflow as tf

flags.DEFINE_float("lr", 0.05, "Learning rate.")
flags.DEFINE_integer("epochs", 4, "Epochs.")
flags.DEFINE_string("tag", "", "A label; changes nothing.")
flags.DEFINE_string("fail_marker", "", "Crash after epoch 1 while this file exists.")
FLAGS = flags.FLAGS


class CrashAfterFirstEpoch(tf.keras.callbacks.Callback):

    def on_epoch_end(self, epoch, logs=None):
        if epoch == 0 and FLAGS.fail_marker and os.path.exists(FLAGS.fail_marker):
            raise SystemExit(f"sweep_digits: crashing on purpose ({FLAGS.fail_marker} exists)")


def main(_):
    model_dir = os.environ["MODEL_DIR"]
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).reshape(-1, 8, 8, 1).astype("float32")
    rt = tfdist.init()
    start = rt.resume(model_dir)
    tf.keras.utils.set_random_seed(0)

    def train_data(ctx):
        ds = tf.data.Dataset.from_tensor_slices((x[:1440], y[:1440]))
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        return ds.shuffle(1440, seed=0).repeat().batch(32, drop_remainder=True)

    with rt.scope():
        model = tf.keras.Sequential([
            tf.keras.layers.Input((8, 8, 1)),
            tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(10),
        ])
        model.compile(optimizer=rt.optimizer(tf.keras.optimizers.SGD(FLAGS.lr, momentum=0.9)),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
    callbacks = rt.callbacks(model_dir=model_dir, batch_size=32)
    model.fit(rt.dataset(train_data, skip_steps=start.steps_done),
              epochs=FLAGS.epochs,
              steps_per_epoch=1440 // rt.global_batch_size(32),
              callbacks=callbacks + [CrashAfterFirstEpoch()],
              verbose=0)
    _, accuracy = model.evaluate(x[1440:], y[1440:], verbose=0)
    callbacks.summary.add(final=dict(test_accuracy=accuracy))
    if rt.is_chief:
        np.savez(os.path.join(model_dir, "weights.npz"), *model.get_weights())
    rt.shutdown()


if __name__ == "__main__":
    app.run(main)
