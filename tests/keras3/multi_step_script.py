"""Keras 3 under mirrored over 2 logical CPUs: the same model fitted and evaluated with
steps_per_execution 1 and 4 (on a repeated input, 8 steps an epoch, and on a finite one of 10
batches, which 4 does not divide), the 4 with tfdist's throughput meter (its input-wait timer
runs the call's steps in its own plain loop, tfdist.keras_compat.keras3_adapter.instrument_steps)
and without it (tfdist.keras_compat.multi_step runs them; Keras's own loop fails there). argv:
OUT (JSON): each one's history, weights and evaluation."""

import json
import sys

import numpy as np

import tfdist

rt = tfdist.init(strategy="mirrored", cpu_devices=2)
import keras  # noqa: E402  (after tfdist.init, as the docs write it)
import tensorflow as tf  # noqa: E402

x = np.random.RandomState(0).rand(640, 4).astype("float32")
y = np.arange(640) % 3
repeated = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(64)
finite = tf.data.Dataset.from_tensor_slices((x[:600], y[:600])).batch(64)  # 10 batches: 4, 4, 2
test = tf.data.Dataset.from_tensor_slices((x[:320], y[:320])).batch(64)  # 5 batches: 4 and 1 left
runs = {}
for data in ("repeated", "finite"):
    for name, steps_per_execution, meter in (("1", 1, True), ("4", 4, True), ("4-nometer", 4,
                                                                              False)):
        keras.utils.set_random_seed(0)
        with rt.scope():
            model = keras.Sequential([keras.Input((4, )), keras.layers.Dense(3)])
            # Adam on the finite input: a step counted but not trained changes its update
            optimizer = (keras.optimizers.SGD(0.1, momentum=0.9)
                         if data == "repeated" else keras.optimizers.Adam(0.01))
            model.compile(optimizer=optimizer,
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          metrics=["accuracy"],
                          steps_per_execution=steps_per_execution)
        history = model.fit(repeated if data == "repeated" else finite,
                            steps_per_epoch=8 if data == "repeated" else None,
                            epochs=2,
                            verbose=0,
                            callbacks=rt.callbacks(meter=meter))
        runs[f"{data}/{name}"] = {
            "history": history.history,
            "weights": [w.tolist() for w in model.get_weights()],
            "evaluation": model.evaluate(test, verbose=0),
            "iterations": int(model.optimizer.iterations.numpy()),
        }
with open(sys.argv[1], "w") as f:
    json.dump({"keras": keras.__version__, "replicas": rt.num_replicas, "runs": runs}, f)
