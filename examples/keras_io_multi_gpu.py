"""keras.io's guide "Multi-GPU distributed training with TensorFlow" (Keras 3, `import keras`), on
scikit-learn's digits instead of MNIST (no download) and for 8 epochs instead of 2 (a smaller data
set: 0.977-0.980 test accuracy on 2 workers in 3 runs, 2026-11-25; tfdist's test asks >= 0.95).
Run it: `tfdist launch -n 2 -- python examples/keras_io_multi_gpu.py`, or
`sbatch jobs/multi_worker.sbatch runs/guide -- python examples/keras_io_multi_gpu.py`.

tfdist's two lines (marked `# tfdist`): `import tfdist`, and the guide's
`strategy = tf.distribute.MirroredStrategy()` (the GPUs of one machine) becomes
`strategy = tfdist.init().strategy`: the strategy over every task of the job (several tasks:
MultiWorkerMirroredStrategy; one task: MirroredStrategy over its GPUs). The script keeps its
`strategy.scope()` and `strategy.num_replicas_in_sync`. A script that kept its own
MirroredStrategy on several tasks stops at that line (tfdist's SecondStrategy: a MirroredStrategy
holds one process's devices): the line has to change.

With `MODEL_DIR` set (`jobs/` sets it) tfdist checkpoints every epoch and a script started again
resumes (the guide's own `ModelCheckpoint` section is not part of this example). Optional
argument: a directory for the result file that tfdist's tests read (examples/results.py).
"""

import sys

import tensorflow as tf
import keras

import tfdist  # tfdist

import digits_data
import results


def get_compiled_model():
    # Make a simple 2-layer densely-connected neural network.
    inputs = keras.Input(shape=(64, ))
    x = keras.layers.Dense(256, activation="relu")(inputs)
    x = keras.layers.Dense(256, activation="relu")(x)
    outputs = keras.layers.Dense(10)(x)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    return model


def get_dataset():
    batch_size = 32
    num_val_samples = 200

    # Return the digits dataset in the form of a `tf.data.Dataset`.
    (x_train, y_train), (x_test, y_test) = digits_data.load_data()

    # Preprocess the data (these are Numpy arrays)
    x_train = x_train.reshape(-1, 64).astype("float32") / 255
    x_test = x_test.reshape(-1, 64).astype("float32") / 255
    y_train = y_train.astype("float32")
    y_test = y_test.astype("float32")

    # Reserve num_val_samples samples for validation
    x_val = x_train[-num_val_samples:]
    y_val = y_train[-num_val_samples:]
    x_train = x_train[:-num_val_samples]
    y_train = y_train[:-num_val_samples]
    return (
        tf.data.Dataset.from_tensor_slices((x_train, y_train)).batch(batch_size),
        tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(batch_size),
        tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(batch_size),
    )


# Create a MirroredStrategy.
strategy = tfdist.init().strategy  # tfdist: was tf.distribute.MirroredStrategy()
print("Number of devices: {}".format(strategy.num_replicas_in_sync))

# Open a strategy scope.
with strategy.scope():
    # Everything that creates variables should be under the strategy scope.
    # In general this is only model construction & `compile()`.
    model = get_compiled_model()

# Train the model on all available devices.
train_dataset, val_dataset, test_dataset = get_dataset()
model.fit(train_dataset, epochs=8, validation_data=val_dataset, verbose=2)

# Test the model on all available devices.
_, accuracy = model.evaluate(test_dataset, verbose=0)
results.save(sys.argv[1] if len(sys.argv) > 1 else None, model, accuracy)
