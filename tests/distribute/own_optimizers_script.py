"""A model whose train_step steps optimizers of its own, as a GAN's does (compile() without an
optimizer, one per player), trained under parameter servers: chief + ps + 2 workers via `tfdist
launch -n 4`. `python own_optimizers_script.py OUT_DIR KERAS` (KERAS: tf_keras or keras3). The
chief writes OUT_DIR/result.json: the steps its progress watchdog counted, the optimizers', and
its checkpoints (OUT_DIR/run)."""

import json
import os
import sys

import numpy as np

import tfdist
import tensorflow as tf
from tfdist.train.checkpoint import latest

out_dir, which = sys.argv[1], sys.argv[2]
if which == "keras3":
    import keras
else:
    keras = tf.keras  # tf-keras: the test exports TF_USE_LEGACY_KERAS=1 (keras_environ)
    assert keras.__name__.startswith("tf_keras"), "TF_USE_LEGACY_KERAS=1 not exported: Keras 3"

EPOCHS, STEPS = 3, 20
rt = tfdist.init(strategy="parameter_server")  # ps and workers serve here and exit


class TwoPlayers(keras.Model):
    """A critic learns to tell real samples from the generator's; the generator, to fool it."""

    def __init__(self):
        super().__init__()
        self.generator = keras.Sequential([keras.Input((8, )), keras.layers.Dense(8)])
        self.critic = keras.Sequential([keras.Input((8, )), keras.layers.Dense(1)])

    def call(self, noise):
        return self.critic(self.generator(noise))

    def compile(self, generator_optimizer, critic_optimizer):
        super().compile()
        self.generator_optimizer, self.critic_optimizer = generator_optimizer, critic_optimizer

    def train_step(self, real):
        noise = tf.random.normal(tf.shape(real))
        with tf.GradientTape() as tape:
            critic_loss = (tf.reduce_mean(self.critic(self.generator(noise))) -
                           tf.reduce_mean(self.critic(real)))
        variables = self.critic.trainable_variables
        self.critic_optimizer.apply_gradients(zip(tape.gradient(critic_loss, variables), variables))
        with tf.GradientTape() as tape:
            generator_loss = -tf.reduce_mean(self.critic(self.generator(noise)))
        variables = self.generator.trainable_variables
        self.generator_optimizer.apply_gradients(
            zip(tape.gradient(generator_loss, variables), variables))
        return {"critic_loss": critic_loss, "generator_loss": generator_loss}


def dataset_fn(input_context):
    real = np.random.RandomState(input_context.input_pipeline_id).normal(3.0, 1.0, (512, 8))
    return tf.data.Dataset.from_tensor_slices(real.astype("float32")).batch(16).repeat()


with rt.scope():
    model = TwoPlayers()
    model.compile(keras.optimizers.SGD(0.01), keras.optimizers.SGD(0.01))
    # Under parameter servers the optimizers' variables are made here, where the strategy
    # places them, not inside the steps the workers run.
    model.generator_optimizer.build(model.generator.trainable_variables)
    model.critic_optimizer.build(model.critic.trainable_variables)

model_dir = os.path.join(out_dir, "run")
callbacks = rt.callbacks(model_dir)  # and checkpoints
model.fit(rt.dataset(dataset_fn),
          epochs=EPOCHS,
          steps_per_epoch=STEPS,
          verbose=2,
          callbacks=callbacks)
with open(os.path.join(out_dir, "result.json"), "w") as f:
    json.dump(
        {
            "steps": EPOCHS * STEPS,
            "watchdog_steps": callbacks.watchdog.steps,
            "model_optimizer_iterations": int(model.optimizer.iterations.numpy()),
            "critic_optimizer_iterations": int(model.critic_optimizer.iterations.numpy()),
            "checkpoints": sorted(os.listdir(os.path.join(model_dir, "checkpoints"))),
            "last_checkpoint": latest(model_dir)[1],
        }, f)
