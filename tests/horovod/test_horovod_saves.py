"""Horovod on the two lines, the script's own saves and its Keras: an unchanged script with `import
tfdist` and `tfdist.init()`, run by `tfdist launch -n 2 --strategy horovod`, saves its model after
fit (`.keras`, `.h5`, tf-keras's SavedModel) and a fresh process that never imports Horovod (nor
tfdist) loads each file with plain Keras: the script's own optimizer class and config, the chief's
weights and (`.keras`) optimizer state. A script that imports `tf_keras` itself, without
TF_USE_LEGACY_KERAS=1 (so Horovod's Keras API is bound to Keras 3), trains with Horovod's callbacks
of its model's Keras (tfdist.keras_compat.horovod_binding.callbacks_for_model).

Measured before (2026-11-27, TensorFlow 2.18, tf-keras 2.18, Keras 3.15.1, Horovod 0.28.1):
tf-keras's `.keras` named the optimizer `horovod._keras.SGD` and did not load ("Could not locate
class 'SGD'"), its SavedModel needed Horovod's ops ("Op type not registered 'HorovodAllreduce'"),
its `.h5` and Keras 3's files loaded; the `import tf_keras` script failed at fit's start
("'BroadcastGlobalVariablesCallback' object has no attribute '_implements_train_batch_hooks'")."""

import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import TFDIST, keras_environ, requires_horovod, run

pytestmark = [pytest.mark.horovod, pytest.mark.slow, requires_horovod]
SCRIPT = str(Path(__file__).parent / "save_hvd_script.py")
# The script's Keras: tf.keras under the switch, `import keras`, `import tf_keras` without it.
ENVIRON = {"2": keras_environ(2), "3": keras_environ(3), "tf_keras_import": keras_environ(3)}


@pytest.mark.parametrize("keras", ["2", "3", "tf_keras_import"])
def test_saves_load_without_horovod(keras, tmp_path):
    r = run([
        TFDIST, "launch", "-n", "2", "--strategy", "horovod", "--", sys.executable, SCRIPT, keras,
        tmp_path, "train"
    ],
            timeout=300,
            env=ENVIRON[keras])
    said = r.stdout + r.stderr
    assert r.returncode == 0, said[-3000:]
    assert said.count("SGD wrapped in Horovod's DistributedOptimizer at compile") == 1, said
    r0, r1 = (np.load(tmp_path / f"weights.{rank}.npz") for rank in range(2))
    for saved in (r0, r1):
        assert list(saved["mro"]).count("SGD") == 2, list(saved["mro"])  # wrapped once
    names = [k for k in r0.files if k.startswith("arr_")]
    assert names
    for name in names:  # each rank trained its half of each batch: one model only if averaged
        np.testing.assert_array_equal(r0[name], r1[name])
    np.testing.assert_array_equal(r0["optimizer"], r1["optimizer"])

    r = run([sys.executable, SCRIPT, keras, tmp_path, "load"], env=ENVIRON[keras])
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    files = ["model.keras", "model.h5"] + (["model_savedmodel"] if keras != "3" else [])
    for name in files:
        assert f"loaded {name}: " in r.stdout, r.stdout
