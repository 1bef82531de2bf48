# A plain single-GPU Keras 3 script (`import keras`), made distributed with the lines marked
# "tfdist:" (the README's): tfdist's callbacks checkpoint every epoch, only from the chief, and a
# stopped run resumes at the step it reached.
import json
import os
import sys

import tfdist  # tfdist

import keras
import tensorflow as tf

import digits_data

rt = tfdist.init()  # tfdist: one task: as before; several: MultiWorkerMirroredStrategy

out_dir = sys.argv[1]
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 8

(x_train, y_train), (x_test, y_test) = digits_data.load_data()
dataset = tf.data.Dataset.from_tensor_slices((x_train / 255.0, y_train))
dataset = dataset.shuffle(1400, seed=1).repeat().batch(64)

with rt.scope():  # tfdist: the model's variables where the strategy wants them
    model = keras.Sequential([
        keras.Input((8, 8)),
        keras.layers.Reshape((8, 8, 1)),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10)
    ])
    optimizer = keras.optimizers.SGD(0.05, momentum=0.9)
    model.compile(
        optimizer=rt.optimizer(optimizer),  # tfdist: (Horovod wraps it)
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"])

callbacks = rt.callbacks(model_dir=os.path.join(out_dir, "run"))  # tfdist: checkpoints, resume
model.fit(dataset, epochs=epochs, steps_per_epoch=40, callbacks=callbacks, verbose=2)

_, accuracy = model.evaluate(x_test / 255.0, y_test, verbose=0)
if rt.is_chief:
    with open(os.path.join(out_dir, "result.json"), "w") as f:
        json.dump({"test_accuracy": accuracy, "replicas": rt.num_replicas}, f)
