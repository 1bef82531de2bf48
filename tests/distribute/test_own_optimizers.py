"""A train_step that steps optimizers of its own (a GAN's), under parameter servers: the chief's
hooks see steps scheduled, not done, so its progress watchdog reads a counter of steps done on a
parameter server. Not the optimizer's: `model.optimizer` (compile()'s default) never moves here,
and a watchdog reading it would end a healthy run; nor does a checkpoint name count it. Real
chief, ps and 2 workers, both Kerases."""

import json
from pathlib import Path

import pytest

from tests.helpers import PYTHON, WAIT, keras_environ, launch, tf_keras_twin

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parent / "own_optimizers_script.py"


@pytest.mark.parametrize("keras", [tf_keras_twin("tf_keras"), "keras3"])
def test_the_watchdog_counts_the_steps_of_a_train_step_with_optimizers_of_its_own(tmp_path, keras):
    r = launch(4, PYTHON, SCRIPT, tmp_path, keras, timeout=WAIT, env=keras_environ(keras))
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    res = json.loads((tmp_path / "result.json").read_text())
    # What makes the case: the model's optimizer stood still while the players' moved.
    assert res["model_optimizer_iterations"] == 0, res
    assert res["critic_optimizer_iterations"] == res["steps"], res
    # Read at each epoch's end, when every scheduled step has run: the exact count.
    assert res["watchdog_steps"] == res["steps"], res
    # Checkpoints count the steps trained where that optimizer did not (the last 2 kept).
    assert res["checkpoints"] == ["ckpt-40", "ckpt-60"], res
    assert (res["last_checkpoint"]["epoch"], res["last_checkpoint"]["global_step"]) == (3, 60), res
    assert res["last_checkpoint"]["model"] == "TwoPlayers with 81 parameters", res
