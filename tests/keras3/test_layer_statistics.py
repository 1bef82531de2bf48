"""Keras 3 under multi_worker: BatchNormalization's moving statistics are the same on every rank
and in the chief's checkpoint, the mean of what each worker's own batches gave
(tfdist.keras3.layer_statistics), as tf-keras's on-read variables have them."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import launch

pytestmark = pytest.mark.slow
SCRIPT = str(Path(__file__).parent / "bn_script.py")
STATISTICS = ("moving_mean", "moving_variance")


def train(out, *args):
    """bn_script.py on 2 workers: each rank's weights by variable path."""
    out.mkdir()
    proc = launch(2, sys.executable, SCRIPT, str(out), *args, timeout=420)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [{
        k: np.array(v)
        for k, v in json.loads((out / f"rank-{r}.json").read_text()).items()
    } for r in (0, 1)]


def test_moving_statistics_are_averaged_over_the_workers(tmp_path):
    import tensorflow as tf

    synced = train(tmp_path / "synced")
    unsynced = train(tmp_path / "unsynced", "unsynced")
    names = list(synced[0])
    moving = [n for n in names if n.endswith(STATISTICS)]
    assert len(moving) == 2, names
    # Every variable identical on both ranks, to the bit.
    for name in names:
        np.testing.assert_array_equal(synced[0][name], synced[1][name], err_msg=name)
    # Keras 3 alone: the trained weights agree (a gradient step is all-reduced) but each worker
    # keeps its own statistics (its data lie around another mean).
    for name in names:
        if name in moving:
            assert not np.allclose(unsynced[0][name], unsynced[1][name]), name
        else:
            np.testing.assert_array_equal(unsynced[0][name], unsynced[1][name], err_msg=name)
    # The statistics do not feed the training steps (a step normalises by its batch's), so both
    # runs train the same weights; the moving average is affine in the statistic, so averaging at
    # each checkpoint and epoch end ends at the mean of the two workers' own (float32 rounding).
    for name in names:
        if name in moving:
            np.testing.assert_allclose(synced[0][name], (unsynced[0][name] + unsynced[1][name]) / 2,
                                       rtol=1e-5,
                                       atol=1e-6,
                                       err_msg=name)
        else:
            np.testing.assert_allclose(synced[0][name], unsynced[0][name], rtol=1e-6, err_msg=name)
    # The chief's last checkpoint (the end of epoch 2) holds the averaged statistics.
    from tfdist.train.checkpoint import latest

    path, meta = latest(str(tmp_path / "synced" / "run"))
    assert (meta["epoch"], meta["step"]) == (2, 0), meta
    reader = tf.train.load_checkpoint(str(Path(path) / "state"))
    saved = {
        n: reader.get_tensor(n)
        for n, _ in tf.train.list_variables(str(Path(path) / "state"))
        if n.endswith(tuple(f"{s}/.ATTRIBUTES/VARIABLE_VALUE" for s in STATISTICS))
    }
    assert len(saved) == 2, sorted(saved)
    for value in saved.values():
        assert any(np.array_equal(value, synced[0][n]) for n in moving), value
