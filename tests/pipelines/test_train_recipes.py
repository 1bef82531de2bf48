"""Every bundled recipe trained end to end by `tfdist train`, its options given with
--pipeline_option, on a small real data set the test makes (nothing downloaded): each learns its
data (the test accuracy, or for synthetic's random labels the training set memorized), except
tfds's tiny_ids, whose labels its images do not tell (read and trained, not learnt)."""

import json

import numpy as np
import pytest

from tests.data import helpers
from tests.helpers import TFDIST, reached, run

pytestmark = pytest.mark.slow

# On the newest stack: digits (its disk cache is read nowhere else) and image_folder (learnt from
# pixels TensorFlow decodes and resizes). The hdf5, tfds and synthetic recipes' datasets are read
# as `tfdist train` reads them by tests/pipelines/test_recipes.py on every stack, and what
# `tfdist train` does with a recipe's dataset is the same for each: those three on the default
# stack only.


def train(tmp_path, pipeline, *args):
    model_dir = tmp_path / "run"
    r = run([
        TFDIST, "train", f"--pipeline={pipeline}", f"--model_dir={model_dir}", "--notensorboard",
        *args
    ])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert metrics["pipeline"] == pipeline
    assert np.isfinite(metrics["final"]["loss"]) and metrics["samples_per_sec"] > 0
    return metrics


def test_digits(tmp_path):
    metrics = train(tmp_path, "digits", "--epochs=2", f"--data_dir={tmp_path / 'cache'}",
                    "--pipeline_option=cache=disk")
    assert metrics["steps_per_epoch"] == 1437 // 32
    # 0.906 (326 of 360) in each of 2 runs here (2026-11-26); 0.8 leaves 38 samples for another
    # CPU's float order, and an untrained model is at 0.1.
    assert reached(metrics["final"]["test_accuracy"], 0.8)


def test_image_folder(tmp_path):
    """Dark and bright images, JPEG and PNG: class 'a' vs 'b' is learnt from the pixels."""
    root = helpers.write_image_folder(tmp_path / "images")
    metrics = train(tmp_path, "image_folder", "--epochs=4", "--batch_size=8", "--model=mlp",
                    f"--data_dir={tmp_path / 'cache'}", f"--pipeline_option=source={root}",
                    "--pipeline_option=image_size=8", "--pipeline_option=num_shards=2")
    assert metrics["steps_per_epoch"] == 32 // 8  # 40 images, 20 % held out for test
    assert metrics["final"]["test_accuracy"] == 1.0


@pytest.mark.default_stack
def test_hdf5(tmp_path):
    """Two classes of 4x4 uint8 arrays, a dark and a bright one, with noise."""
    import h5py

    rng = np.random.default_rng(0)
    for split, n in (("train", 96), ("test", 32)):
        y = np.arange(n) % 2
        x = (y[:, None, None, None] * 150 + rng.integers(0, 100, (n, 4, 4, 1))).astype(np.uint8)
        with h5py.File(tmp_path / f"{split}.h5", "w") as f:
            f["features"], f["y"] = x, y
    metrics = train(tmp_path, "hdf5", "--epochs=4", "--batch_size=8", "--model=mlp",
                    f"--pipeline_option=train_files={tmp_path / 'train.h5'}",
                    f"--pipeline_option=test_files={tmp_path / 'test.h5'}",
                    "--pipeline_option=x=features")
    assert metrics["steps_per_epoch"] == 96 // 8
    # 1.0 (test loss 0.003) in each of 2 runs here (2026-11-26); 0.9 leaves 3 of 32 samples.
    assert reached(metrics["final"]["test_accuracy"], 0.9, n=32)


@pytest.mark.default_stack
def test_tfds_reads_a_built_data_set_and_trains_on_it(tmp_path):
    """A TFDS data set built here by its builder (tests/data/helpers.py), read from data_dir.
    Its label (id mod 3) is not told by its image (id mod 256): after 8 epochs the training
    accuracy was still 0.30 here, so what is checked is the reading and the steps, not learning."""
    data_dir = helpers.build_tiny_tfds(str(tmp_path / "tfds"), 2)
    metrics = train(tmp_path, "tfds", "--epochs=2", "--batch_size=8", "--model=mlp",
                    f"--data_dir={data_dir}", "--pipeline_option=name=tiny_ids")
    assert metrics["steps_per_epoch"] == 120 // 8


@pytest.mark.default_stack
def test_synthetic(tmp_path):
    """Random tensors and random labels: nothing to generalize, but 8 passes over its 128 samples
    memorize them (epochs of 8 steps: well under a second in all)."""
    metrics = train(tmp_path, "synthetic", "--epochs=8", "--batch_size=16", "--model=mlp",
                    "--pipeline_option=shape=6,6,2", "--pipeline_option=num_train=128",
                    "--pipeline_option=num_test=32", "--pipeline_option=num_classes=4")
    assert metrics["steps_per_epoch"] == 128 // 16
    # Training accuracy 0.711, loss 0.741 in each of 2 runs here (2026-11-26; 1 epoch: 0.24 and
    # 1.42, chance 0.25 and ln 4 = 1.39): over 0.5 and under 1.0 is learnt, with a margin.
    final = metrics["final"]
    assert final["accuracy"] > 0.5 and final["loss"] < 1.0, final


@pytest.mark.default_stack  # tfdist's own option check
def test_a_wrong_option_stops_before_training(tmp_path):
    r = run([TFDIST, "train", "--pipeline=tfds", "--pipeline_option=nmae=mnist"])
    assert r.returncode == 2, r.stderr[-3000:]
    assert ("tfdist train: error: --pipeline_option=nmae=mnist: the 'tfds' pipeline has no option "
            "'nmae'. Its options: ") in r.stderr
    r = run([TFDIST, "train", "--pipeline=tfds", f"--data_dir={tmp_path}"])
    assert r.returncode == 2
    assert "the tfds pipeline needs name=DATASET" in r.stderr
    assert "--pipeline_option=name=mnist" in r.stderr
