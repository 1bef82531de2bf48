"""keras.io's "Multi-GPU distributed training with TensorFlow" guide in little (Keras 3): the
script makes its own `strategy = tf.distribute.MirroredStrategy()` and builds and compiles the
model in `with strategy.scope():`, with tfdist's two lines (marked) added at the top. A tiny model
on 256 of scikit-learn's digits, one epoch. argv: HOW (`own`: the guide's
`tf.distribute.MirroredStrategy()`; `fix`: `tf.distribute.get_strategy()` in its place, what
tfdist's error says to write). Prints `replicas N, weights SUM` after fit (SUM: of
every weight, to compare the ranks)."""

import sys

import tensorflow as tf
import keras
from sklearn.datasets import load_digits

import tfdist  # tfdist

tfdist.init()  # tfdist

HOW = sys.argv[1]
digits = load_digits()
x = (digits.data[:256] / 16.0).astype("float32")
y = digits.target[:256].astype("float32")

# Create a MirroredStrategy.
if HOW == "own":
    strategy = tf.distribute.MirroredStrategy()
else:
    strategy = tf.distribute.get_strategy()
print("Number of devices: {}".format(strategy.num_replicas_in_sync))

# Open a strategy scope.
with strategy.scope():
    inputs = keras.Input(shape=(64, ))
    outputs = keras.layers.Dense(10)(inputs)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(64), epochs=1, verbose=0)
total = sum(float(w.numpy().sum()) for w in model.weights)
print(f"replicas {model.distribute_strategy.num_replicas_in_sync}, weights {total!r}", flush=True)
