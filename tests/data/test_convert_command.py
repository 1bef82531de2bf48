"""`tfdist convert` as users run it: a subprocess, a progress bar, a summary, a no-op re-run."""

import os
import subprocess
import sys

import numpy as np
import pytest

from tfdist.data import read_manifest

# The command around tfdist.data's writers, which tests/data checks on every stack.
pytestmark = pytest.mark.default_stack


def _convert(*args):
    return subprocess.run([sys.executable, "-m", "tfdist.cli.main", "convert", *args],
                          capture_output=True,
                          text=True,
                          timeout=180,
                          cwd=os.getcwd())


def _image_folder(root, per_class=3):
    import tfdist  # noqa: F401
    import tensorflow as tf

    for label in ("cat", "dog"):
        os.makedirs(root / label)
        for i in range(per_class):
            pixels = tf.fill([6, 6, 3], tf.constant(40 * i, tf.uint8))
            (root / label / f"{i}.jpg").write_bytes(tf.io.encode_jpeg(pixels).numpy())


@pytest.mark.slow
def test_convert_image_folder_then_again_is_a_no_op(tmp_path):
    _image_folder(tmp_path / "images", per_class=5)
    out = str(tmp_path / "packed")
    first = _convert("--source", str(tmp_path / "images"), "--output", out, "--shards=2")
    assert first.returncode == 0, first.stderr[-2000:]
    assert f"wrote {out}: tfrecord shards of {tmp_path / 'images'}" in first.stdout
    assert "train: 8 records in 2 shards" in first.stdout
    assert "test: 2 records in 2 shards" in first.stdout
    assert "100%" in first.stderr and "10/10" in first.stderr  # the progress bar
    manifest = read_manifest(out)
    assert manifest["meta"]["classes"] == ["cat", "dog"]

    again = _convert("--source", str(tmp_path / "images"), "--output", out, "--shards=2")
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.startswith(f"nothing to do: {out} already holds these inputs")
    assert read_manifest(out) == manifest


@pytest.mark.slow
def test_convert_npz_to_hdf5_and_errors(tmp_path):
    path = tmp_path / "arrays.npz"
    np.savez(path,
             x_train=np.ones((6, 2), np.float32),
             y_train=np.arange(6),
             x_test=np.zeros((2, 2), np.float32),
             y_test=np.arange(2))
    out = str(tmp_path / "h5")
    done = _convert("--source", str(path), "--output", out, "--format=hdf5", "--shards=3",
                    "--noprogress")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "train: 6 records in 3 shards" in done.stdout and "x float32[2]" in done.stdout
    assert read_manifest(out)["format"] == "hdf5"

    bad = _convert("--source", str(tmp_path / "missing.npz"), "--output", out)
    assert bad.returncode == 2
    assert f"tfdist convert: error: {tmp_path / 'missing.npz'} does not exist." in bad.stderr

    other = _convert("--source", str(path), "--output", out, "--shards=2", "--noprogress")
    assert other.returncode == 2 and "pass --overwrite" in other.stderr
