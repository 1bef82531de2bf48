"""A user's subclassed model (its variables made in its first step, as in TensorFlow's "advanced"
quickstart) with tfdist's checkpoints: `python subclassed_script.py MODEL_DIR KERAS EPOCHS
[own_dataset | every_2_steps]` (KERAS: tf_keras or keras3; own_dataset: a tf.data.Dataset, not
rt.dataset; every_2_steps: a checkpoint every 2 steps too). rt.dataset skips no steps: a run
stopped mid-epoch resumes at that epoch's start. Seeded and without shuffling, so a run stopped
and resumed ends with the same state as one that never stopped."""

import sys

import numpy as np

import tfdist
import tensorflow as tf

model_dir, which, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
own_dataset = sys.argv[4:] == ["own_dataset"]  # a tf.data.Dataset of its own, not rt.dataset
checkpoint_steps = 2 if sys.argv[4:] == ["every_2_steps"] else 0
if which == "keras3":
    import keras
else:
    keras = tf.keras  # tf-keras: the test exports TF_USE_LEGACY_KERAS=1 (keras_environ)
    assert keras.__name__.startswith("tf_keras"), "TF_USE_LEGACY_KERAS=1 not exported: Keras 3"

rt = tfdist.init()
keras.utils.set_random_seed(0)


class Classifier(keras.Model):

    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(32, activation="relu")
        self.logits = keras.layers.Dense(2)

    def call(self, x):
        return self.logits(self.hidden(x))


x = np.random.RandomState(0).rand(256, 8).astype("float32")
y = (x.sum(axis=1) > 4).astype("int64")

with rt.scope():
    model = Classifier()
    model.compile(keras.optimizers.Adam(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def data(ctx):
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat()


model.fit(
    data(None) if own_dataset else rt.dataset(data),
    epochs=epochs,
    steps_per_epoch=8,  # one pass over the 256 samples: every epoch sees the same batches
    verbose=2,
    callbacks=rt.callbacks(model_dir, checkpoint_steps=checkpoint_steps))
