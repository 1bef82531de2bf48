"""Keras 3 under mirrored over 2 logical CPUs: the same model fitted and evaluated with
steps_per_execution 1 and 4, the 4 with tfdist's throughput meter (its input-wait timer runs the
call's steps in its own plain loop, tfdist.keras_compat.keras3_adapter.instrument_steps) and
without it (tfdist.keras_compat.multi_step runs them; Keras's own loop fails there). argv: OUT
(JSON): each one's history, weights and evaluation."""

import json
import sys

import numpy as np

import tfdist

rt = tfdist.init(strategy="mirrored", cpu_devices=2)
import keras  # noqa: E402  (after tfdist.init, as the docs write it)
import tensorflow as tf  # noqa: E402

x = np.random.RandomState(0).rand(640, 4).astype("float32")
y = np.arange(640) % 3
train = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(64)
test = tf.data.Dataset.from_tensor_slices((x[:320], y[:320])).batch(64)  # 5 batches: 4 and 1 left
runs = {}
for name, steps_per_execution, meter in (("1", 1, True), ("4", 4, True), ("4-nometer", 4, False)):
    keras.utils.set_random_seed(0)
    with rt.scope():
        model = keras.Sequential([keras.Input((4, )), keras.layers.Dense(3)])
        model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"],
                      steps_per_execution=steps_per_execution)
    history = model.fit(train,
                        steps_per_epoch=8,
                        epochs=2,
                        verbose=0,
                        callbacks=rt.callbacks(meter=meter))
    runs[name] = {
        "history": history.history,
        "weights": [w.tolist() for w in model.get_weights()],
        "evaluation": model.evaluate(test, verbose=0),
        "iterations": int(model.optimizer.iterations.numpy()),
    }
with open(sys.argv[1], "w") as f:
    json.dump({"keras": keras.__version__, "replicas": rt.num_replicas, "runs": runs}, f)
