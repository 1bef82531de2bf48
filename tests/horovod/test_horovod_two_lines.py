"""Horovod on the two lines: an unchanged Keras script with `import tfdist` and `tfdist.init()`,
run by `tfdist launch -n 2 --strategy horovod`, trains one model over both ranks on both Kerases
(tfdist.distribute.horovod_fit): every variable equal on both ranks, each sample trained once per
epoch over the ranks (counted by the model), the weights of one process on the same global batch;
a script that keeps Horovod's own lines is left as it wrote them, its optimizer wrapped once."""

import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import TFDIST, keras_environ, requires_horovod, run

pytestmark = [pytest.mark.horovod, pytest.mark.slow, requires_horovod]
SCRIPT = str(Path(__file__).parent / "two_lines_hvd_script.py")

# Measured 2026-11-26 (TensorFlow 2.18, tf-keras and Keras 3.15.1, Horovod 0.28.1 with gloo, this
# machine's CPUs): 2 ranks ended with the weights of one process within 4.6e-7 of each weight's
# largest magnitude (both Kerases, arrays and dataset; the order of the sums differs, not the
# math); 30 times that.
SAME_MATH = 1.5e-5
# The script's data: 1350 samples to train and 151 to validate, a rank of 2 takes half of each,
# less the one sample of the last validation batch (23) that no two equal halves can hold.
TRAINED, EVALUATED = 675, 75


def horovod_launch(*cmd, env=None):
    return run([TFDIST, "launch", "-n", "2", "--strategy", "horovod", "--", *cmd],
               timeout=300,
               env=env)


def weights(saved, prefix):
    names = sorted((k for k in saved.files if k.startswith(prefix)),
                   key=lambda k: int(k[len(prefix):]))
    return [saved[k] for k in names]


def assert_one_model(r0, r1, reference):
    """Both ranks: every variable the same to the bit, the optimizer wrapped once, half the
    samples each epoch, the weights of one process."""
    for ours, theirs in zip(weights(r0, "arr_"), weights(r1, "arr_")):
        np.testing.assert_array_equal(ours, theirs)
    assert reference["counts"].tolist() == [[1350, 151], [2700, 302]]
    for saved in (r0, r1):
        mro = list(saved["mro"])
        assert mro.count("SGD") == 2, mro  # Horovod's class over Keras's: wrapped once
        # At each epoch's end: the samples trained and evaluated so far.
        assert saved["counts"].tolist() == [[TRAINED, EVALUATED], [2 * TRAINED, 2 * EVALUATED]]
        for theirs, ours in zip(weights(saved, "trainable_"), weights(reference, "trainable_")):
            assert np.max(np.abs(theirs - ours)) / np.max(np.abs(ours)) <= SAME_MATH
        np.testing.assert_allclose(saved["loss"], reference["loss"], rtol=1e-5)


@pytest.mark.parametrize("keras", [2, pytest.param(3, marks=pytest.mark.newest)])
def test_two_lines(keras, tmp_path):
    """One process trains three models, one after the other: on NumPy arrays with
    validation_split, on the same batches as batched tf.data datasets (fit's and
    validation_data), and with Horovod's own lines (hvd.DistributedOptimizer, its callbacks, the
    arrays split by the script: every other sample, the per-rank batch 32)."""
    one, out = tmp_path / "one", tmp_path / "w"
    r = run([sys.executable, SCRIPT,
             str(keras), str(one), "arrays", "single"],
            env=keras_environ(keras))
    assert r.returncode == 0, r.stderr[-3000:]
    reference = np.load(f"{one}.arrays.0.npz")
    r = horovod_launch(sys.executable,
                       SCRIPT,
                       str(keras),
                       str(out),
                       "arrays,dataset,own",
                       "two_lines",
                       env=keras_environ(keras))
    said = r.stdout + r.stderr  # launch passes the tasks' output on, prefixed with their ranks
    assert r.returncode == 0, said[-3000:]
    saved = {
        kind: [np.load(f"{out}.{kind}.{rank}.npz") for rank in range(2)]
        for kind in ("arrays", "dataset", "own")
    }

    # The two lines: compile wraps the optimizer once, fit splits the arrays and the batches.
    assert said.count("SGD wrapped in Horovod's DistributedOptimizer at compile") == 1, said
    assert ("the train data split over 2 ranks, 675 samples each an epoch in batches of 32 (the "
            "global batch 64).") in said
    assert ("the validation data split over 2 ranks, 75 samples each an epoch in batches of 32 "
            "(the global batch 64); its last 1 samples dropped") in said
    assert "fit's x dataset split over 2 ranks" in said
    assert_one_model(*saved["arrays"], reference)
    assert_one_model(*saved["dataset"], reference)

    # Horovod's own lines: left as written, not wrapped again, not split again.
    assert "the script's optimizer is distributed already" in said
    r0, r1 = saved["own"]
    for theirs in (r0, r1):
        assert list(theirs["mro"]).count("SGD") == 2
        assert theirs["counts"][:, 0].tolist() == [TRAINED, 2 * TRAINED]  # its own half, once
    for ours, theirs in zip(weights(r0, "trainable_"), weights(r1, "trainable_")):
        np.testing.assert_array_equal(ours, theirs)
