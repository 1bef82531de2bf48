"""steps_per_execution 4 in a real fit (tests/train/spe_script.py, one process a Keras): after each
call tfdist's reading of the steps done equals the optimizer's count on every Keras (Keras 3.0-3.10
pass on_train_batch_end a call's first step, 3.11 on and tf-keras its last); the watchdog counts
steps, not calls; the step checkpoint saves where the count passes a multiple of its interval.
Stopped and resumed in a user's script: tests/train/test_user_script.py."""

import json
import re

import pytest

from tests.helpers import PYTHON, TFDIST, keras_environ, run, tf_keras_twin

pytestmark = pytest.mark.slow
SCRIPT = "tests/train/spe_script.py"


# Keras 3 on the newest stack too: 3.15 passes another index than the default stack's 3.8.
@pytest.mark.parametrize("keras", [tf_keras_twin(2), pytest.param(3, marks=pytest.mark.newest)])
def test_every_call_is_read_as_the_steps_it_ran(keras, tmp_path):
    out = tmp_path / "out.json"
    r = run([PYTHON, SCRIPT, keras, tmp_path / "run", out], env=keras_environ(keras))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["keras"].startswith(f"{keras}."), result["keras"]  # tf-keras: 2.x
    # Each call's end: (steps done as tfdist reads it, the optimizer's count in the epoch).
    assert result["positions"] == [[4, 4], [8, 8], [12, 12]] * 2
    assert result["optimizer_steps"] == result["watchdog_steps"] == 24
    # (epoch, step, global step): every 6 steps, at the first call's end past it (8, 12, 20,
    # 24), and at each epoch's end.
    assert result["saves"] == [[0, 8, 8], [0, 12, 12], [1, 0, 12], [1, 8, 20], [1, 12, 24],
                               [2, 0, 24]]


def test_tfdist_train_takes_it(tmp_path):
    """`tfdist train --steps_per_execution=4` compiles with it: 12 steps an epoch in 3 calls, step
    checkpoints (every 6) at the calls' ends past each multiple, as the script above saves; the
    meter's input wait measured."""
    r = run([
        TFDIST, "train", "--pipeline=digits", "--steps_per_execution=4", "--steps_per_epoch=12",
        "--epochs=2", "--checkpoint_steps=6", f"--model_dir={tmp_path / 'run'}"
    ])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    out = r.stdout + r.stderr
    saved = re.findall(r"checkpoint \S+/ckpt-(\d+) \(epoch (\d+), step (\d+)\)", out)
    assert saved == [("8", "0", "8"), ("12", "0", "12"), ("20", "1", "8"), ("24", "1", "12")], out
    # The meter times every step's wait for its batch inside the calls.
    assert "input wait not measured" not in out
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert len(metrics["epoch_input_wait"]) == 2, metrics
    assert all(0 <= share < 1 for share in metrics["epoch_input_wait"]), metrics
