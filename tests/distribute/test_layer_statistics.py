"""BatchNormalization's moving statistics under data parallelism: the same on every rank and in
the chief's checkpoint, the mean of what each rank's own batches gave, on both Kerases, as
tf-keras's on-read variables have them under a tf.distribute strategy
(tfdist.distribute.layer_statistics). Each rank is fed its own data."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import keras_environ, launch, requires_horovod

pytestmark = pytest.mark.slow
SCRIPT = str(Path(__file__).parent / "bn_script.py")
STATISTICS = ("moving_mean", "moving_variance")


def train(out, strategy, keras, *args):
    """bn_script.py on 2 ranks: each rank's [(name, weight)] in the model's order."""
    out.mkdir()
    proc = launch(2,
                  sys.executable,
                  SCRIPT,
                  str(out),
                  strategy,
                  str(keras),
                  *args,
                  timeout=420,
                  env=keras_environ(keras))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [[(n, np.array(w)) for n, w in json.loads((out / f"rank-{r}.json").read_text())]
            for r in (0, 1)]


def is_statistic(name):
    return any(s in name for s in STATISTICS)


def assert_the_same_on_both_ranks(ranks):
    (a, b), names = ranks, [n for n, _ in ranks[0]]
    assert sum(map(is_statistic, names)) == 2, names
    for (name, wa), (_, wb) in zip(a, b):
        np.testing.assert_array_equal(wa, wb, err_msg=name)  # to the bit


def assert_checkpointed(model_dir, final):
    """The chief's last checkpoint (after the last of 2 x 6 steps) holds the final statistics."""
    import tensorflow as tf

    from tfdist.train.checkpoint import latest

    path, meta = latest(str(model_dir))
    assert meta["global_step"] == 12, meta
    state = str(Path(path) / "state")
    ends = tuple(f"{s}/.ATTRIBUTES/VARIABLE_VALUE" for s in STATISTICS)
    saved = [n for n, _ in tf.train.list_variables(state) if n.endswith(ends)]
    assert len(saved) == 2, saved
    reader = tf.train.load_checkpoint(state)
    for name in saved:
        value = reader.get_tensor(name)
        assert any(np.array_equal(value, w) for n, w in final if is_statistic(n)), name


@pytest.mark.newest
def test_keras3_multi_worker_statistics_are_the_mean_of_every_workers(tmp_path):
    """Keras 3 alone keeps each worker's own statistics; tfdist averages them."""
    synced = train(tmp_path / "synced", "multi_worker", 3)
    unsynced = train(tmp_path / "unsynced", "multi_worker", 3, "unsynced")
    assert_the_same_on_both_ranks(synced)
    # Keras 3 alone: the trained weights agree (each step's gradient is all-reduced) but each
    # worker keeps its own statistics (its data lie around another mean).
    for (name, wa), (_, wb) in zip(*unsynced):
        if is_statistic(name):
            assert not np.allclose(wa, wb), name
        else:
            np.testing.assert_array_equal(wa, wb, err_msg=name)
    # The statistics do not feed the training steps (a step normalises by its batch's), so both
    # runs train the same weights; the moving average is affine in the statistic, so averaging at
    # each checkpoint and epoch end ends at the mean of the two workers' own (float32 rounding).
    for (name, w), (_, w0), (_, w1) in zip(synced[0], *unsynced):
        if is_statistic(name):
            np.testing.assert_allclose(w, (w0 + w1) / 2, rtol=1e-5, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_allclose(w, w0, rtol=1e-6, err_msg=name)
    assert_checkpointed(tmp_path / "synced" / "run", synced[0])


# Newest stack: Horovod with Keras 3 (the allreduce is Horovod's on every Keras). tf-keras under
# multi_worker: TensorFlow's own on-read averaging, each replica's copy also averaged by tfdist.
@pytest.mark.parametrize("strategy,keras", [
    pytest.param("multi_worker", 2, marks=pytest.mark.default_stack),
    pytest.param(
        "horovod", 2, marks=[requires_horovod, pytest.mark.horovod, pytest.mark.default_stack]),
    pytest.param("horovod", 3, marks=[requires_horovod, pytest.mark.horovod]),
])
def test_every_rank_holds_the_same_statistics(strategy, keras, tmp_path):
    ranks = train(tmp_path / "out", strategy, keras)
    assert_the_same_on_both_ranks(ranks)
    assert_checkpointed(tmp_path / "out" / "run", ranks[0])


@pytest.mark.parametrize("unsynced", [False, True])
def test_keras3_mirrored_replicas_hold_the_same_statistics(unsynced, tmp_path):
    """One process, 2 replicas (logical CPUs), each fed rows around another mean: Keras 3 alone
    leaves each replica's copy its own; tfdist gives both the mean."""
    out = tmp_path / "out"
    out.mkdir()
    proc = launch(1,
                  sys.executable,
                  SCRIPT,
                  str(out),
                  "mirrored",
                  "3",
                  *(["unsynced"] if unsynced else []),
                  timeout=420)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    copies = json.loads((out / "replicas.json").read_text())
    assert sorted(copies) == sorted(STATISTICS), copies
    for name, (a, b) in copies.items():
        assert np.array_equal(a, b) != unsynced, (name, a, b)
