"""N replicas with the same global batch and data order end with the same weights as one."""

import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import keras_environ, launch, requires_horovod, run, tf_keras_twin

HERE = Path(__file__).parent

pytestmark = pytest.mark.slow
SCRIPT = str(HERE / "same_math_script.py")


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """One replica's final weights, by Keras (2: tf-keras, 3: Keras 3)."""
    done = {}

    def weights(keras):
        if keras not in done:
            out = tmp_path_factory.mktemp(f"single{keras}") / "w.npz"
            r = run([sys.executable, SCRIPT, "auto",
                     str(out), str(keras)],
                    env=keras_environ(keras))
            assert r.returncode == 0, r.stderr[-3000:]
            done[keras] = load(out)
        return done[keras]

    return weights


def load(path):
    data = np.load(path)
    arrays = [data[f"arr_{i}"] for i in range(len(data.files) - 1)]
    half = len(arrays) // 2
    return int(data["replicas"]), arrays[:half], arrays[half:]


def assert_same_weights(single, other, replicas):
    assert (single[0], other[0]) == (1, replicas)
    for ours, theirs, initial in zip(single[1], other[1], single[2]):
        scale = np.max(np.abs(ours))
        assert np.max(np.abs(ours - initial)) / scale > 1e-2  # training moved the weights
        assert np.max(np.abs(ours - theirs)) / scale <= 1e-5


def assert_same_ranks(chief, other):
    for ours, theirs in zip(chief[1], other[1]):
        np.testing.assert_array_equal(ours, theirs)


# On the newest stack mirrored's cross-device sum runs with Keras 3: tf-keras's part of the same
# math (its optimizer's aggregation across replicas) is test_multi_worker_two_processes[2]'s.
@pytest.mark.newest
@pytest.mark.parametrize("keras", [pytest.param(2, marks=pytest.mark.default_stack), 3])
def test_mirrored_two_logical_cpus(single, keras, tmp_path):
    r = run([sys.executable, SCRIPT, "mirrored",
             str(tmp_path / "w.npz"),
             str(keras)],
            env=keras_environ(keras))
    assert r.returncode == 0, r.stderr[-3000:]
    assert_same_weights(single(keras), load(tmp_path / "w.npz"), 2)


@pytest.mark.newest
@pytest.mark.parametrize("keras", [tf_keras_twin(2), 3])
def test_multi_worker_two_processes(single, keras, tmp_path):
    r = launch(2,
               sys.executable,
               SCRIPT,
               "multi_worker",
               str(tmp_path / "w.npz"),
               str(keras),
               env=keras_environ(keras))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert_same_weights(single(keras), load(tmp_path / "w.npz"), 2)
    assert_same_ranks(load(tmp_path / "w.npz"), load(tmp_path / "w.npz.rank1.npz"))


# tf-keras (Horovod's own Keras API); Horovod under Keras 3 trains the same math in
# tests/horovod/test_horovod_two_lines.py[3].
@pytest.mark.newest
@requires_horovod
def test_horovod_two_processes(single, tmp_path):
    r = launch(2,
               sys.executable,
               SCRIPT,
               "horovod",
               str(tmp_path / "w.npz"),
               "2",
               env=keras_environ(2))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert_same_weights(single(2), load(tmp_path / "w.npz"), 2)
    assert_same_ranks(load(tmp_path / "w.npz"), load(tmp_path / "w.npz.rank1.npz"))
