"""One epoch of a Keras 3 fit under mirrored over 2 logical CPUs with learning rate 0 (the model
does not change), then the epoch's logged loss and accuracy beside the ones computed on the whole
data set. argv: OUT (JSON)."""

import json
import sys

import numpy as np

import tfdist

rt = tfdist.init(strategy="mirrored", cpu_devices=2)
import keras  # noqa: E402  (after tfdist.init, as the docs write it)

with rt.scope():
    model = keras.Sequential([keras.Input((4, )), keras.layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.SGD(0.0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
x = np.random.RandomState(0).rand(512, 4).astype("float32")
y = np.arange(512) % 3
# 16 steps of 32: long enough for Keras 3.8's metrics to show the first step's values.
history = model.fit(x, y, batch_size=32, epochs=1, verbose=0, shuffle=False)
logits = model(x).numpy()
json.dump(
    {
        "keras": keras.__version__,
        "replicas": rt.num_replicas,
        "logged": {
            k: history.history[k][0]
            for k in ("loss", "accuracy")
        },
        "true": {
            "loss":
            float(
                keras.losses.sparse_categorical_crossentropy(y, logits,
                                                             from_logits=True).numpy().mean()),
            "accuracy":
            float((logits.argmax(axis=1) == y).mean()),
        },
    }, open(sys.argv[1], "w"))
