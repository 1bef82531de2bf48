"""What the hand-written baselines share: the digits data and the two models, written the plain way
(no tfdist). The models are layer for layer those of `tfdist train --model=cnn|resnet_small`
(tfdist/app/models.py); the data is the same scikit-learn digits split (1437 train / 360 test,
stratified, random_state=0) that tfdist's digits pipeline packs.

The Keras is the one the bench exports, chosen the way each Keras's users choose it:
TF_USE_LEGACY_KERAS=1 (the tf-keras rows): TensorFlow's `tf.keras`, which that switch makes
tf-keras; otherwise (the Keras 3 rows, TF_USE_LEGACY_KERAS=0): `import keras`.
"""

import argparse
import os

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

TF_KERAS = os.environ.get("TF_USE_LEGACY_KERAS") in ("1", "true", "True")  # TensorFlow's test
if TF_KERAS:
    keras = tf.keras
else:
    import keras

layers = keras.layers


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="cnn", choices=["cnn", "resnet_small"])
    parser.add_argument("--batch_size", type=int, default=32, help="per worker")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps_per_epoch", type=int, default=50)
    parser.add_argument("--lr", type=float, default=0.05, help="single-worker rate, times workers")
    parser.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
    return parser.parse_args()


def make_optimizer(name, lr):
    """SGD with momentum 0.9 or Adam, as `tfdist train --optimizer` makes them."""
    if name == "adam":
        return keras.optimizers.Adam(lr)
    return keras.optimizers.SGD(lr, momentum=0.9)


def load_data():
    images, labels = load_digits(return_X_y=True)
    images = (images / 16.0).astype(np.float32).reshape(-1, 8, 8, 1)
    x_train, x_test, y_train, y_test = train_test_split(images,
                                                        labels,
                                                        test_size=360,
                                                        random_state=0,
                                                        stratify=labels)
    return (x_train, y_train.astype(np.int32)), (x_test, y_test.astype(np.int32))


def cnn(input_shape=(8, 8, 1), num_classes=10):
    return keras.Sequential([
        layers.Input(input_shape),
        layers.Conv2D(32, 3, padding="same", activation="relu"),
        layers.Conv2D(64, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Flatten(),
        layers.Dense(128, activation="relu"),
        layers.Dense(num_classes),
    ])


def resnet_small(input_shape=(8, 8, 1), num_classes=10, width=32, blocks=3):
    inputs = layers.Input(input_shape)
    x = layers.Conv2D(width, 3, padding="same", use_bias=False)(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    for _ in range(blocks):
        y = layers.Conv2D(width, 3, padding="same", use_bias=False)(x)
        y = layers.BatchNormalization()(y)
        y = layers.ReLU()(y)
        y = layers.Conv2D(width, 3, padding="same", use_bias=False)(y)
        y = layers.BatchNormalization()(y)
        x = layers.ReLU()(layers.Add()([x, y]))
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(num_classes)(x))


def build_model(name):
    return {"cnn": cnn, "resnet_small": resnet_small}[name]()


def compile_model(model, optimizer):
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model
