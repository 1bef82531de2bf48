"""A subclassed model, whose variables do not exist before its first step (tf-keras builds it
there; Keras 3 before the callbacks start), with tfdist's checkpoints: it trains, and a finished
run of 2 epochs, extended to 4 (run again with --epochs 4: it resumes from its epoch-2 checkpoint),
ends with the same weights, optimizer slots and step as a run of 4. A stop mid-epoch is not what
this checks (killed after step 12 of 32 and resumed, the last layer's Adam slots differed from
the straight run's here, 2026-11-26: a finding, not yet a test). tf-keras fills the variables
from the checkpoint as the first step makes them; a Keras 3 model is built from rt.dataset's
element spec before the restore, and without it refused with what to do."""

import re

import numpy as np
import pytest

from tests.helpers import PYTHON, keras_environ, run

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


@pytest.mark.parametrize("keras", ["tf_keras", "keras3"])
def test_a_subclassed_models_run_extended_from_2_to_4_epochs_ends_as_a_run_of_4(tmp_path, keras):
    extended, straight = tmp_path / "extended", tmp_path / "straight"
    for model_dir, epochs in ((extended, 2), (extended, 4), (straight, 4)):
        r = run([PYTHON, SCRIPT, model_dir, keras, epochs], env=keras_environ(keras))
        out = r.stdout + r.stderr
        assert r.returncode == 0, out[-3000:]
        if (model_dir, epochs) == (extended, 4):
            assert re.search(r"tfdist: resuming from \S+/ckpt-16 \(epoch 2, step 0\)", out), out

    (meta_a, state_a), (meta_b, state_b) = final_state(extended), final_state(straight)
    assert meta_a["model"] == meta_b["model"] and meta_a["model"].startswith("Classifier with")
    assert (meta_a["epoch"], meta_a["global_step"]) == (meta_b["epoch"], meta_b["global_step"]) \
        == (4, 32)
    # The weights (32 + 2 units), Adam's two slots for each, its step: all there and all equal.
    assert state_a.keys() == state_b.keys() and len(state_a) >= 12, sorted(state_a)
    for name in state_a:
        np.testing.assert_allclose(state_a[name], state_b[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_keras3_subclassed_model_tfdist_cannot_build_is_refused_with_what_to_do(tmp_path):
    r = run([PYTHON, SCRIPT, tmp_path / "run", "keras3", 1, "own_dataset"])
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert ("Classifier is not built when fit starts (a subclassed Keras 3 model is built in its "
            "first step), so tfdist cannot restore its checkpoint into it. Build it before fit: "
            "pass the data through `rt.dataset(fn)`") in out, out[-3000:]
