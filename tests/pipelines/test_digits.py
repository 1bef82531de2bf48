"""The digits recipe: the real sklearn data, packed once, right shapes, labels that fit."""

import numpy as np
import pytest

import tfdist  # noqa: F401
from pipelines import load_pipeline
from tfdist.data import make_input_context


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    module = load_pipeline("digits")
    return module, str(tmp_path_factory.mktemp("digits"))


def _arrays(ds):
    xs, ys = zip(*[(x, y) for x, y in ds.as_numpy_iterator()])
    return np.concatenate(xs), np.concatenate(ys)


def test_info(digits):
    module, data_dir = digits
    assert module.info(data_dir) == {
        "input_shape": (8, 8, 1),
        "num_classes": 10,
        "num_train": 1437,
        "num_test": 360
    }


def test_images_in_unit_range_and_labels_fit_them(digits):
    from sklearn.linear_model import LogisticRegression

    module, data_dir = digits
    x_train, y_train = _arrays(
        module.dataset("train",
                       make_input_context(1, 0, 1),
                       64,
                       data_dir=data_dir,
                       drop_remainder=False))
    x_test, y_test = _arrays(
        module.dataset("test",
                       make_input_context(1, 0, 1),
                       64,
                       data_dir=data_dir,
                       drop_remainder=False))
    assert x_train.shape == (1437, 8, 8, 1) and x_test.shape == (360, 8, 8, 1)
    assert x_train.dtype == np.float32 and y_train.dtype == np.int32
    assert x_train.min() == 0.0 and x_train.max() == 1.0
    assert sorted(np.bincount(y_test)) == [35, 35, 36, 36, 36, 36, 36, 36, 37, 37]  # stratified
    # Labels that belong to their images: a linear model learns them well.
    model = LogisticRegression(max_iter=500).fit(x_train.reshape(1437, -1), y_train)
    assert model.score(x_test.reshape(360, -1), y_test) > 0.93


def test_test_split_is_never_shuffled(digits):
    module, data_dir = digits
    a = _arrays(module.dataset("test", make_input_context(1, 0, 1), 40, data_dir=data_dir))[1]
    b = _arrays(
        module.dataset("test", make_input_context(1, 0, 1), 40, data_dir=data_dir, seed=7,
                       epoch=3))[1]
    assert a.tolist() == b.tolist()


def test_two_workers_see_the_global_batches_of_one(digits):
    module, data_dir = digits
    one = [
        y for _, y in
        module.dataset("train", make_input_context(1, 0, 1), 64, data_dir=data_dir,
                       shuffle=False).as_numpy_iterator()
    ]
    two = [[(x, y) for x, y in module.dataset(
        "train", make_input_context(
            2, i, 2), 32, data_dir=data_dir, shuffle=False).as_numpy_iterator()] for i in range(2)]
    assert len(one) == len(two[0]) == len(two[1]) == 1437 // 64
    for k, labels in enumerate(one):
        # Worker i holds global samples i, i+2, ...: interleaving them restores the global batch.
        merged = np.empty(64, np.int32)
        merged[0::2], merged[1::2] = two[0][k][1], two[1][k][1]
        assert merged.tolist() == labels.tolist()


def test_load_pipeline_from_a_users_file(tmp_path, digits):
    _, data_dir = digits
    user = tmp_path / "my_digits.py"
    user.write_text("from pipelines.digits import info, dataset  # noqa: F401\n")
    module = load_pipeline(str(user))
    assert module.info(data_dir)["num_train"] == 1437
