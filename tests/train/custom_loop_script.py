"""A custom training loop (TensorFlow's "Custom training with tf.distribute.Strategy" tutorial)
written for tfdist: `rt.strategy.run` of a GradientTape step over `rt.dataset`'s batches, the loss
averaged over the global batch, the per-replica losses summed with `rt.strategy.reduce`. Keras
is tf.keras, whichever TensorFlow makes it. Prints the loss of each epoch and a hash of every
variable (`python custom_loop_script.py`, under `tfdist launch -n 2 --strategy=multi_worker`)."""

import hashlib

import numpy as np
import tensorflow as tf

import tfdist

PER_REPLICA, EPOCHS, STEPS = 16, 4, 10

rt = tfdist.init()
global_batch = rt.global_batch_size(PER_REPLICA)
with rt.scope():
    model = tf.keras.Sequential([
        tf.keras.Input((8, )),
        tf.keras.layers.Dense(16, activation="relu"),
        tf.keras.layers.Dense(1)
    ])
    optimizer = tf.keras.optimizers.SGD(rt.scale_lr(0.05))

# Each rank its own samples of one linear target: the ranks end equal only if the steps agree.
rng = np.random.default_rng(rt.rank)
x = rng.normal(size=(640, 8)).astype("float32")
y = (x @ np.arange(1, 9, dtype="float32") / 8)[:, None]


def input_fn(ctx):
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(PER_REPLICA)


iterator = iter(rt.dataset(input_fn))


def step(inputs):
    features, labels = inputs
    with tf.GradientTape() as tape:
        per_example = tf.reduce_mean(tf.square(model(features, training=True) - labels), axis=1)
        loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


@tf.function
def train_step(iterator):
    losses = rt.strategy.run(step, args=(next(iterator), ))
    return rt.strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)


for epoch in range(EPOCHS):
    total = sum(float(train_step(iterator)) for _ in range(STEPS))
    print(f"LOSS {epoch} {total / STEPS:.6f}", flush=True)
hashes = [hashlib.sha256(np.asarray(w).tobytes()).hexdigest()[:16] for w in model.get_weights()]
print("RESULT", type(model).__module__.split(".")[0], rt.strategy_name, rt.rank, *hashes)
