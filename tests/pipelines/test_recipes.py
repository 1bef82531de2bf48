"""image_folder, hdf5, tfds and synthetic recipes on small real files."""

import os

import numpy as np
import pytest

import tfdist  # noqa: F401
import tensorflow as tf

from tests.data import helpers
from pipelines import load_pipeline
from tfdist.data import DataError, make_input_context

CTX = make_input_context(1, 0, 1)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """2 classes x 6 images: JPEG and PNG, of two sizes."""
    root = tmp_path_factory.mktemp("images")
    for label, value in (("a", 30), ("b", 220)):
        os.makedirs(root / label)
        for i in range(6):
            size = 10 if i % 2 else 14
            pixels = tf.fill([size, size, 3], tf.constant(value, tf.uint8))
            encoded = tf.io.encode_png(pixels) if i % 3 == 0 else tf.io.encode_jpeg(pixels)
            (root / label / f"{i}.{'png' if i % 3 == 0 else 'jpg'}").write_bytes(encoded.numpy())
    return str(root)


def test_image_folder(images, tmp_path):
    module = load_pipeline("image_folder")
    info = module.info(str(tmp_path), source=images, image_size=8, num_shards=2)
    assert info == {"input_shape": (8, 8, 3), "num_classes": 2, "num_train": 10, "num_test": 2}

    def batches(**kwargs):
        return list(
            module.dataset("train",
                           CTX,
                           5,
                           data_dir=str(tmp_path),
                           source=images,
                           image_size=8,
                           num_shards=2,
                           **kwargs).as_numpy_iterator())

    first = batches(seed=3)
    assert len(first) == 2 and first[0][0].shape == (5, 8, 8, 3)
    x = np.concatenate([b[0] for b in first])
    y = np.concatenate([b[1] for b in first])
    assert 0.0 <= x.min() and x.max() <= 1.0
    # Class a is dark, class b bright: the labels travel with their images (crop pads with 0).
    assert np.all(x[y == 0].max(axis=(1, 2, 3)) < 0.2) and np.all(x[y == 1].max(axis=(1, 2,
                                                                                      3)) > 0.8)
    again = batches(seed=3)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(first, again)), "augmentation differs"
    assert len(os.listdir(tmp_path)) == 1, "packed more than once"


def test_image_folder_needs_a_source(tmp_path):
    with pytest.raises(DataError, match="image_folder needs source=IMAGE_FOLDER"):
        load_pipeline("image_folder").dataset("train", CTX, 4, data_dir=str(tmp_path))


def test_hdf5(tmp_path):
    import h5py

    for split, n in (("train", 30), ("test", 10)):
        with h5py.File(tmp_path / f"{split}.h5", "w") as f:
            f["x"] = np.random.default_rng(0).integers(0, 255, (n, 4, 4, 1), dtype=np.uint8)
            f["y"] = np.arange(n) % 5
    module = load_pipeline("hdf5")
    files = dict(train_files=str(tmp_path / "train.h5"), test_files=str(tmp_path / "test.h5"))
    assert module.info(**files) == {
        "input_shape": (4, 4, 1),
        "num_classes": 5,
        "num_train": 30,
        "num_test": 10
    }
    x, y = next(iter(module.dataset("train", CTX, 8, **files)))
    assert x.shape == (8, 4, 4, 1) and x.dtype == tf.float32 and y.dtype == tf.int32
    ys = [
        int(v) for _, b in module.dataset("test", CTX, 3, drop_remainder=False, **files) for v in b
    ]
    assert ys == [i % 5 for i in range(10)]
    # Endless (as `tfdist train` reads it): chunks of rows span epochs and repeat rows.
    endless = module.dataset("train", CTX, 6, repeat=True, seed=1, **files).take(3 * 30 // 6)
    labels = np.concatenate([b.numpy() for _, b in endless]).reshape(3, 30)
    for epoch in labels:
        assert sorted(epoch) == sorted(i % 5 for i in range(30))
    assert not np.array_equal(labels[0], labels[1])  # each epoch its own order


def test_tfds(tmp_path):
    data_dir = helpers.build_tiny_tfds(str(tmp_path), 2)
    module = load_pipeline("tfds")
    assert module.info(data_dir, name="tiny_ids") == {
        "input_shape": (4, 4, 1),
        "num_classes": 3,
        "num_train": 120,
        "num_test": 20
    }
    x, y = next(iter(module.dataset("test", CTX, 4, data_dir=data_dir, name="tiny_ids")))
    assert x.shape == (4, 4, 4, 1) and x.dtype == tf.float32 and y.dtype == tf.int32


def test_synthetic():
    module = load_pipeline("synthetic")
    assert module.info(shape="6,6,2", num_train=64)["input_shape"] == (6, 6, 2)
    a = [x.numpy() for x, _ in module.dataset("train", CTX, 8, shape="6,6,2", num_train=64)]
    b = [x.numpy() for x, _ in module.dataset("train", CTX, 8, shape="6,6,2", num_train=64)]
    assert len(a) == 8 and a[0].shape == (8, 6, 6, 2)
    assert all(np.array_equal(p, q) for p, q in zip(a, b))
