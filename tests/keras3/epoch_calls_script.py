"""Keras 3 at steps_per_execution=4 over NumPy input of 57 batches an epoch (4 does not divide it),
with tfdist's checkpoints (step checkpoints every 8 steps), Adam: an epoch is its input's pass and
ends with it. With STEPS_PER_EPOCH, over a repeated input, epochs of that many steps instead.
argv: MODEL_DIR ("-": none) [STEPS_PER_EPOCH]; prints RESULT <optimizer iterations> <sum of |first
kernel|>."""

import sys

import numpy as np
from sklearn.datasets import load_digits

import tfdist

model_dir = None if sys.argv[1] == "-" else sys.argv[1]
rt = tfdist.init(model_dir=model_dir)
import keras  # noqa: E402  (after tfdist.init, as the docs write it)

x, y = load_digits(return_X_y=True)
x = (x / 16.0).reshape(-1, 64).astype("float32")  # 1797 digits: 57 batches of 32, the last of 5
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((64, )), keras.layers.Dense(10)])
model.compile("adam",
              keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              steps_per_execution=4)
if len(sys.argv) > 2:
    import tensorflow as tf

    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32)
    model.fit(data, steps_per_epoch=int(sys.argv[2]), epochs=2, verbose=0, callbacks=rt.callbacks())
else:
    model.fit(x,
              y,
              batch_size=32,
              epochs=3,
              verbose=0,
              shuffle=False,
              callbacks=rt.callbacks(checkpoint_steps=8))
print("RESULT", int(model.optimizer.iterations.numpy()),
      repr(float(np.abs(model.get_weights()[0]).astype("float64").sum())))
