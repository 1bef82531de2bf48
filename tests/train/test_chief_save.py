"""A script that saves on the chief only (`if rank == 0: model.save(...)` and
`model.save_weights(...)` after fit), 2 workers (multi_worker), both Kerases, with tfdist's two
lines (tests/train/chief_save_script.py): the other worker ends at once (`exit`), or every rank
evaluates after the chief's saves (`evaluate`). The run ends with status 0; the shared directory
holds the chief's two files and nothing else; a new process without tfdist loads both (the whole
model with its optimizer's state) with the chief's weights, to the bit (its BatchNormalization
statistics the mean over the workers, as the chief's model reads them). Before tfdist read each
task's own values in a save (measured 2026-11-27, TensorFlow 2.18): the chief's save waited in a
collective the other worker never joined (Keras 3: the broadcast that makes its throwaway reference
optimizer's variables; tf-keras: the all-reduce that reads a metric's sync-on-read total), and
failed once that worker had ended (`exit`), or met the collectives of the other worker's evaluate
(`evaluate`). One run of 2 workers a case."""

import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import keras_environ, launch, run

pytestmark = pytest.mark.slow
SCRIPT = str(Path(__file__).parent / "chief_save_script.py")


def weights(saved):
    return [saved[f"arr_{i}"] for i in range(len([k for k in saved.files if k.startswith("arr_")]))]


@pytest.mark.parametrize("other", ["exit", "evaluate"])
@pytest.mark.parametrize("keras", [2, 3])
def test_chief_alone_saves(keras, other, tmp_path):
    shared, out = tmp_path / "shared", tmp_path / "out"
    shared.mkdir()
    script = [sys.executable, SCRIPT, str(keras), str(shared), str(out)]
    r = launch(2, *script, other, env=keras_environ(keras))
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(p.name for p in shared.iterdir()) == ["final.keras", "final.weights.h5"]
    chief, rank1 = (weights(np.load(f"{out}.{rank}.npz")) for rank in (0, 1))
    for ours, theirs in zip(chief, rank1, strict=True):  # one model
        np.testing.assert_array_equal(ours, theirs)
    if other == "evaluate":  # the strategy's metrics: the same on both ranks
        np.testing.assert_array_equal(np.load(f"{out}.0.evaluate.npy"),
                                      np.load(f"{out}.1.evaluate.npy"))

    # A new program, plain Keras: the .keras file then the .weights.h5 file, each the chief's.
    r = run([*script, "load"], env=keras_environ(keras))
    assert r.returncode == 0, r.stderr[-3000:]
    loaded = np.load(f"{out}.loaded.npz")
    found = weights(loaded)
    assert len(found) == 2 * len(chief)
    for ours, theirs in zip(chief * 2, found, strict=True):
        np.testing.assert_array_equal(ours, theirs)


# Newest stack: no. tfdist's words on TensorFlow's failure; the saves that work run there.
@pytest.mark.default_stack
def test_a_chief_alone_savedmodel_is_said_in_words(tmp_path):
    """tf-keras's SavedModel on the chief alone still cannot work (TensorFlow's saver all-reduces
    the metrics' on-read variables over the workers): it fails, once the other worker has ended,
    with what to do instead, not a collective's error or "Lost worker" (measured 2026-11-27)."""
    shared, out = tmp_path / "shared", tmp_path / "out"
    shared.mkdir()
    r = launch(2,
               sys.executable,
               SCRIPT,
               "2",
               str(shared),
               str(out),
               "savedmodel",
               env=keras_environ(2))
    assert r.returncode != 0
    said = r.stdout + r.stderr
    assert ("ChiefOnlySaveError: model.save / save_weights in TensorFlow's own format (SavedModel, "
            "a TF checkpoint) failed under multi_worker") in said, said[-3000:]
    assert "or save as .keras / .weights.h5, which the chief can write alone" in said
