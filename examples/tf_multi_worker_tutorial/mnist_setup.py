# TensorFlow's "Multi-worker training with Keras" tutorial's mnist_setup.py, on digits (8x8)
# instead of MNIST (28x28): no download here. Not a line of tfdist.
import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import digits_data  # noqa: E402


def mnist_dataset(batch_size):
    (x_train, y_train), _ = digits_data.load_data()
    # The `x` arrays are in uint8 and have values in the [0, 255] range.
    # You need to convert them to float32 with values in the [0, 1] range.
    x_train = x_train / np.float32(255)
    y_train = y_train.astype(np.int64)
    train_dataset = tf.data.Dataset.from_tensor_slices(
        (x_train, y_train)).shuffle(2000).repeat().batch(batch_size)
    return train_dataset


def test_data():
    _, (x_test, y_test) = digits_data.load_data()
    return x_test / np.float32(255), y_test.astype(np.int64)


def build_and_compile_cnn_model():
    model = tf.keras.Sequential([
        tf.keras.layers.InputLayer(input_shape=(8, 8)),
        tf.keras.layers.Reshape(target_shape=(8, 8, 1)),
        tf.keras.layers.Conv2D(32, 3, activation='relu'),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation='relu'),
        tf.keras.layers.Dense(10)
    ])
    model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=tf.keras.optimizers.SGD(learning_rate=0.05),
                  metrics=['accuracy'])
    return model
