"""The script's own Keras callbacks and saves on 2 workers (multi_worker), both Kerases: with
tfdist's two lines, ModelCheckpoint (`.keras` every epoch, `.weights.h5` best only),
BackupAndRestore, TensorBoard, CSVLogger, EarlyStopping and ReduceLROnPlateau, then
`model.save` and `model.save_weights` to the same paths on every rank (tests/train/
own_callbacks_script.py, each rank on other samples). The chief writes every file, complete and
loadable with its final weights (it loads each after its saves); rank 1 sees the directory
read-only (its own mount namespace, where unprivileged user namespaces allow it), so any write
of its there fails the run. Stopped in the second epoch and fit again, BackupAndRestore resumes
from the chief's backup on both ranks, and EarlyStopping stops both at the same epoch. Before tfdist
did this (2026-11-26): Keras 3's two ranks wrote the same BackupAndRestore file and one died on
its h5 lock in the first epoch; tf-keras's both wrote final.weights.h5 and one died the same
way. One run of 2 workers a Keras."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import keras_environ, launch, tf_keras_twin

pytestmark = pytest.mark.slow
SCRIPT = str(Path(__file__).parent / "own_callbacks_script.py")
# Rank 1 in its own mount namespace, where the shared directory ($1) is read-only.
READ_ONLY_ON_RANK_1 = ('if [ "$TFDIST_LAUNCH_RANK" = 1 ]; then exec unshare -rm sh -c '
                       '\'mount --bind -o ro "$1" "$1" && shift && exec "$@"\' sh "$SHARED" "$@"; '
                       'fi; exec "$@"')
FILES = {"best.weights.h5", "every.keras", "final.keras", "final.weights.h5", "log.csv"}


def read_only_view() -> bool:
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.parametrize("keras", [tf_keras_twin(2), 3])
def test_chief_writes_every_file_and_all_resume(keras, tmp_path):
    shared, out = tmp_path / "shared", tmp_path / "out"
    shared.mkdir()
    script = [sys.executable, SCRIPT, str(keras), str(shared), str(out)]
    if read_only_view():
        script = ["sh", "-c", READ_ONLY_ON_RANK_1, "sh", *script]
    env = {"SHARED": str(shared), **keras_environ(keras)}

    # Both ranks stopped in the second epoch (an exception), then fit again: it resumes from the
    # first epoch's backup. (A new process reads it the same way: `crash`, then a re-run.)
    r = launch(2, *script, "interrupt", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    ranks = [np.load(f"{out}.{rank}.npz") for rank in (0, 1)]
    assert [bool(rank["backup_left"]) for rank in ranks] == [True, True]
    epochs = ranks[0]["epochs"]
    assert epochs[0] == 1, epochs  # resumed after the first epoch (0)
    assert epochs[-1] < 4, epochs  # EarlyStopping ended fit before its last epoch
    for name in ("epochs", "logs", "lr"):  # the same logs, stop and rate on both ranks
        np.testing.assert_array_equal(ranks[0][name], ranks[1][name])
    assert ranks[0]["lr"] < 0.05  # ReduceLROnPlateau lowered it

    found = json.loads((tmp_path / "out.check.json").read_text())
    files = set(found["files"])
    # TensorBoard: the chief's train and validation files of each of the two fits; no backup
    # left (fit ended); nothing of rank 1's.
    events = {f for f in files if f.startswith("tb/")}
    assert files - events == FILES, files
    assert len([f for f in events if f.startswith("tb/train/")]) == 2, events
    assert len([f for f in events if f.startswith("tb/validation/")]) == 2, events
    # Each file loads, with the chief's final weights (the same as rank 1's).
    for name in ("final.keras", "final.weights.h5", "every.keras"):
        assert found[name] is True, (name, found)
    for ours, theirs in zip(*[[s[f"arr_{i}"] for i in range(4)] for s in ranks]):
        np.testing.assert_array_equal(ours, theirs)
    # The chief's CSV: a row for each epoch of the resumed fit, last (tf-keras's CSVLogger may
    # keep the stopped fit's row above them: its file was never closed).
    rows = np.loadtxt(shared / "log.csv", delimiter=",", skiprows=1, ndmin=2)
    np.testing.assert_array_equal(rows[-len(epochs):, 0], epochs)
