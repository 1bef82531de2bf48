"""A subclassed model, whose variables do not exist before its first step (tf-keras builds it
there; Keras 3 before the callbacks start), with tfdist's checkpoints: it trains, and a run killed
mid-epoch (after step 12 of 32, 8 an epoch) and run again, its rt.dataset skipping no steps,
resumes at that epoch's start (its input would start over: resumed at step 12, the steps after it
trained on the epoch's first batches, and the weights and Adam slots differed from a straight
run's, measured 2026-11-27) and ends with the same weights, optimizer slots and step as a run that
never stopped. tf-keras fills the variables from the checkpoint as the first step makes them; a
Keras 3 model is built from rt.dataset's element spec before the restore, and without it refused
with what to do."""

import re

import numpy as np
import pytest

from tests.helpers import PYTHON, keras_environ, run, tf_keras_twin
from tfdist.train.checkpoint import EXIT_AFTER_STEP

pytestmark = pytest.mark.slow

SCRIPT = __import__("pathlib").Path(__file__).resolve().parent / "subclassed_script.py"


def final_state(model_dir):
    """The newest checkpoint's meta.json and every variable in it."""
    import tfdist  # noqa: F401
    import tensorflow as tf

    from tfdist.train.checkpoint import latest

    path, meta = latest(str(model_dir))
    reader = tf.train.load_checkpoint(f"{path}/state")
    return meta, {
        name: reader.get_tensor(name)
        for name in reader.get_variable_to_shape_map() if name.endswith("/VARIABLE_VALUE")
    }


@pytest.mark.parametrize("keras", [tf_keras_twin("tf_keras"), "keras3"])
def test_a_subclassed_models_run_killed_mid_epoch_resumes_at_its_start_and_ends_as_a_straight_run(
        tmp_path, keras):
    stopped, straight = tmp_path / "stopped", tmp_path / "straight"
    killed = run([PYTHON, SCRIPT, stopped, keras, 4, "every_2_steps"],
                 env={
                     EXIT_AFTER_STEP: "12",
                     **keras_environ(keras)
                 })
    assert killed.returncode == 3, (killed.stdout + killed.stderr)[-3000:]
    # Kept: the newest two, and the newest at an epoch's start (else pruned by now), to resume at.
    assert sorted(p.name for p in (stopped / "checkpoints").iterdir()) == \
        ["ckpt-10", "ckpt-12", "ckpt-8"]
    for model_dir in (stopped, straight):
        r = run([PYTHON, SCRIPT, model_dir, keras, 4, "every_2_steps"], env=keras_environ(keras))
        out = r.stdout + r.stderr
        assert r.returncode == 0, out[-3000:]
        if model_dir == stopped:
            assert re.search(
                r"tfdist: resuming from \S+/ckpt-8 \(epoch 1, step 0\), at the epoch's start: "
                r"ckpt-12 \(epoch 1, step 4\) is mid-epoch", out), out[-3000:]

    (meta_a, state_a), (meta_b, state_b) = final_state(stopped), final_state(straight)
    assert meta_a["model"] == meta_b["model"] and meta_a["model"].startswith("Classifier with")
    assert (meta_a["epoch"], meta_a["global_step"]) == (meta_b["epoch"], meta_b["global_step"]) \
        == (4, 32)
    # The weights (32 + 2 units), Adam's two slots for each, its step: all there and all equal.
    assert state_a.keys() == state_b.keys() and len(state_a) >= 12, sorted(state_a)
    for name in state_a:
        np.testing.assert_allclose(state_a[name], state_b[name], rtol=1e-5, atol=1e-6, err_msg=name)
    # The checkpoint of step 12 the resumed run trained again is gone, replaced by its own.
    assert sorted(p.name for p in (stopped / "checkpoints").iterdir()) == ["ckpt-30", "ckpt-32"]


def test_a_keras3_subclassed_model_tfdist_cannot_build_is_refused_with_what_to_do(tmp_path):
    r = run([PYTHON, SCRIPT, tmp_path / "run", "keras3", 1, "own_dataset"])
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert ("Classifier is not built when fit starts (a subclassed Keras 3 model is built in its "
            "first step), so tfdist cannot restore its checkpoint into it. Build it before fit: "
            "pass the data through `rt.dataset(fn)`") in out, out[-3000:]
