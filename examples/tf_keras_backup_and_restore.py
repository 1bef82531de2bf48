"""A plain single-device tf.keras script with its own fault tolerance (Keras's
`BackupAndRestore`, as TensorFlow's "Multi-worker training with Keras" tutorial shows it), on
scikit-learn's digits, with tfdist's two lines (marked `# tfdist`). tf-keras: run it with
TensorFlow's switch, `export TF_USE_LEGACY_KERAS=1`, then
`tfdist launch -n 2 -- python examples/tf_keras_backup_and_restore.py OUT` or
`sbatch jobs/multi_worker.sbatch runs/backup -- python examples/tf_keras_backup_and_restore.py OUT`.

Killed and started again with the same OUT, it resumes after the last epoch its
BackupAndRestore saved (OUT/backup). Arguments: OUT (the backup's directory and the result file
tfdist's tests read, examples/results.py) and optionally the number of epochs (default 8: test
accuracy >= 0.95, tfdist's test's bound).
"""

import os
import sys

import tfdist  # tfdist

import tensorflow as tf

import digits_data
import results

tfdist.init()  # tfdist: before the model; several tasks: MultiWorkerMirroredStrategy

out_dir = sys.argv[1]
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 8

(x_train, y_train), (x_test, y_test) = digits_data.load_data()
dataset = tf.data.Dataset.from_tensor_slices((x_train / 255.0, y_train))
dataset = dataset.shuffle(1400, seed=1).repeat().batch(64)

model = tf.keras.Sequential([
    tf.keras.layers.Reshape((8, 8, 1), input_shape=(8, 8)),
    tf.keras.layers.Conv2D(32, 3, activation="relu"),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(64, activation="relu"),
    tf.keras.layers.Dense(10)
])
model.compile(optimizer=tf.keras.optimizers.SGD(0.05, momentum=0.9),
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])

callbacks = [tf.keras.callbacks.BackupAndRestore(os.path.join(out_dir, "backup"))]
model.fit(dataset, epochs=epochs, steps_per_epoch=40, callbacks=callbacks, verbose=2)

_, accuracy = model.evaluate(x_test / 255.0, y_test, verbose=0)
print("Test accuracy:", accuracy)
results.save(out_dir, model, accuracy)
