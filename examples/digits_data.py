"""scikit-learn's digits in place of MNIST (no download here): what the field scripts load.

The field scripts use it the way the public examples use `tf.keras.datasets.mnist.load_data()`.
"""

import numpy as np


def load_data():
    """((x_train, y_train), (x_test, y_test)): 8x8 images as uint8 0..255, labels int64."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images * (255.0 / 16.0)).astype(np.uint8)
    labels = digits.target.astype(np.int64)
    rng = np.random.RandomState(0)
    order = rng.permutation(len(labels))
    images, labels = images[order], labels[order]
    cut = 1400
    return (images[:cut], labels[:cut]), (images[cut:], labels[cut:])
