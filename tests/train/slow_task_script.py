"""A two-line Keras 3 script whose rank 1 takes 250 ms more per step than rank 0, outside the step
(a callback that sleeps): under multi_worker rank 0 waits for it at each batch's agreement. NumPy
input, as most scripts have it (a last partial batch: the workers agree on every batch)."""

import os
import time

import keras
from sklearn.datasets import load_digits

import tfdist

tfdist.init()
RANK = int(os.environ.get("TFDIST_LAUNCH_RANK", "0"))


class SlowerOnRank1(keras.callbacks.Callback):

    def on_train_batch_end(self, batch, logs=None):
        if RANK == 1:
            time.sleep(0.25)  # about 50 times this tiny model's step: 2 s an epoch


digits = load_digits()
x, y = (digits.images / 16.0).astype("float32")[..., None], digits.target
model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(10)])
model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), optimizer="adam")
model.fit(x, y, batch_size=256, epochs=3, verbose=2, callbacks=[SlowerOnRank1()])
