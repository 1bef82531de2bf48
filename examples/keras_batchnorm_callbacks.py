"""A Keras model with BatchNormalization trained with Keras's own `EarlyStopping` and
`ReduceLROnPlateau` on `validation_split`, on scikit-learn's digits, with tfdist's two lines
(marked `# tfdist`). Either Keras: `tf.keras` is Keras 3, or tf-keras under
`export TF_USE_LEGACY_KERAS=1`. Run it:
`tfdist launch -n 2 -- python examples/keras_batchnorm_callbacks.py`, or
`sbatch jobs/multi_worker.sbatch runs/bn -- python examples/keras_batchnorm_callbacks.py`.

What tfdist keeps equal without a line more: BatchNormalization's moving statistics on every
rank, and the callbacks' decisions (every rank reads the same averaged validation loss, so all
lower the rate and stop at the same epoch). 8 epochs at most: test accuracy 0.980 (tf-keras) and
0.982 (Keras 3) on 2 workers (2026-11-27; tfdist's test asks >= 0.95). Keras 3's
`EarlyStopping(restore_best_weights=True)` sets, when fit ends, the weights it kept at an epoch
end: tfdist averages the statistics before the script's callbacks see them. Optional argument: a
directory for the result file that tfdist's tests read (examples/results.py).
"""

import sys

from tensorflow import keras

import tfdist  # tfdist

import digits_data
import results

tfdist.init()  # tfdist: before the model; several tasks: MultiWorkerMirroredStrategy

(x_train, y_train), (x_test, y_test) = digits_data.load_data()
x_train = x_train.reshape(-1, 8, 8, 1).astype("float32") / 255
x_test = x_test.reshape(-1, 8, 8, 1).astype("float32") / 255

model = keras.Sequential([
    keras.Input(shape=(8, 8, 1)),
    keras.layers.Conv2D(32, 3, use_bias=False),
    keras.layers.BatchNormalization(),
    keras.layers.Activation("relu"),
    keras.layers.Flatten(),
    keras.layers.Dense(10, activation="softmax"),
])
model.compile(optimizer=keras.optimizers.Adam(0.003),
              loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])

callbacks = [
    keras.callbacks.EarlyStopping(monitor="val_loss", patience=2, restore_best_weights=True),
    keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=1),
]
history = model.fit(x_train,
                    y_train,
                    batch_size=64,
                    epochs=8,
                    validation_split=0.1,
                    callbacks=callbacks,
                    verbose=2)

_, accuracy = model.evaluate(x_test, y_test, verbose=0)
print("Test accuracy:", accuracy)
results.save(sys.argv[1] if len(sys.argv) > 1 else None,
             model,
             accuracy,
             epochs=len(history.history["loss"]),
             learning_rate=float(keras.backend.get_value(model.optimizer.learning_rate)))
