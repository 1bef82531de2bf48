"""Keras 3 with a steps_per_execution that does not divide the epoch: an epoch that is its input's
pass ends with the input (its last call runs the steps left), so tfdist's checkpoints take it and
a stopped run resumes to the weights of one never stopped; an epoch of steps_per_epoch steps over
a repeated input trains whole calls past it, which tfdist says at fit's start."""

import re
from pathlib import Path

import pytest

from tests.helpers import PYTHON, run

SCRIPT = Path(__file__).resolve().parent / "epoch_calls_script.py"


def _result(r):
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return re.search(r"^RESULT (\d+) (\S+)$", r.stdout, re.M).groups()


@pytest.mark.slow
@pytest.mark.newest
def test_an_epoch_that_is_its_inputs_pass_is_checkpointed_and_resumed(tmp_path):
    """57 batches at 4 a call, 3 epochs: 171 steps (Keras's own count), not refused (it was:
    'does not divide steps_per_epoch=57 ... every epoch trains 60 steps', which it does not). The
    run stopped after the step checkpoint of global step 89 (epoch 2) ends as the run never
    stopped, weights equal to the last bit."""
    straight = _result(run([PYTHON, SCRIPT, tmp_path / "straight"]))
    assert straight[0] == "171"
    stopped = run([PYTHON, SCRIPT, tmp_path / "stopped"], env={"TFDIST_TEST_EXIT_AFTER_STEP": "89"})
    assert stopped.returncode == 3, stopped.stdout[-2000:] + stopped.stderr[-3000:]
    assert (tmp_path / "stopped" / "checkpoints" / "ckpt-89").is_dir()
    resumed = run([PYTHON, SCRIPT, tmp_path / "stopped"])
    assert "resuming from" in resumed.stdout + resumed.stderr
    assert _result(resumed) == straight


@pytest.mark.slow
def test_an_epoch_of_steps_per_epoch_that_4_does_not_divide_is_said():
    """steps_per_epoch=10 at 4 a call without a model directory: Keras 3 trains 12 steps an
    epoch; tfdist warns once, with the numbers and the fix."""
    r = run([PYTHON, SCRIPT, "-", "10"])
    assert _result(r)[0] == "24"
    out = r.stdout + r.stderr
    assert out.count("steps_per_execution=4 does not divide steps_per_epoch=10: Keras 3 runs "
                     "each call in full, so every epoch trains 12 steps, not 10. Fix: a "
                     "steps_per_epoch that is a multiple of 4 (e.g. 8)") == 1, out[-3000:]
