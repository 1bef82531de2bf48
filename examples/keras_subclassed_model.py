"""A subclassed Keras model (`class MyModel(keras.Model)` with its own `call`, as TensorFlow's
"advanced" quickstart writes it), compiled and trained with `model.fit` on NumPy arrays, on
scikit-learn's digits, with tfdist's two lines (marked `# tfdist`). Either Keras: `tf.keras` is
Keras 3, or tf-keras under `export TF_USE_LEGACY_KERAS=1`. Run it:
`tfdist launch -n 2 -- python examples/keras_subclassed_model.py`, or
`sbatch jobs/multi_worker.sbatch runs/subclassed -- python examples/keras_subclassed_model.py`.

The model's variables are made in its first step, under the strategy tfdist.init() made the
program's default. 6 epochs: test accuracy 0.970 (tf-keras) and 0.977 (Keras 3) on 2 workers
(2026-11-27; Keras 3 after 4 epochs: 0.947; tfdist's test asks >= 0.95). Optional argument: a
directory for the result file that tfdist's tests read (examples/results.py).
"""

import sys

import tensorflow as tf
from tensorflow import keras

import tfdist  # tfdist

import digits_data
import results

tfdist.init()  # tfdist: before the model; several tasks: MultiWorkerMirroredStrategy

(x_train, y_train), (x_test, y_test) = digits_data.load_data()
x_train, x_test = x_train / 255.0, x_test / 255.0

# Add a channels dimension
x_train = x_train[..., tf.newaxis].astype("float32")
x_test = x_test[..., tf.newaxis].astype("float32")


class MyModel(keras.Model):

    def __init__(self):
        super().__init__()
        self.conv1 = keras.layers.Conv2D(32, 3, activation="relu")
        self.flatten = keras.layers.Flatten()
        self.d1 = keras.layers.Dense(128, activation="relu")
        self.d2 = keras.layers.Dense(10)

    def call(self, x):
        x = self.conv1(x)
        x = self.flatten(x)
        x = self.d1(x)
        return self.d2(x)


# Create an instance of the model
model = MyModel()

model.compile(optimizer="adam",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=32, epochs=6, verbose=2)

test_loss, test_accuracy = model.evaluate(x_test, y_test, verbose=0)
print("Test accuracy:", test_accuracy)
results.save(sys.argv[1] if len(sys.argv) > 1 else None, model, test_accuracy)
