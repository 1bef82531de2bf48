"""The watchdog under Keras 3 at many steps a call: Keras 3 calls the batch hooks once a call, so
the watchdog also counts the batches the steps take (the meter's samples, rt.dataset's batches).
Without them a call longer than T ended a healthy run, and a hang inside the first call after an
epoch's end waited out the slow phase's grace (600 s) instead of T.

One `tfdist train` run (Keras 3, mirrored, one process): a pipeline that takes 0.4 s a batch
(blocking_pipeline's `delay`), 40 steps an epoch at 20 a call, so a call takes 8 s or more against
T = 6 s; its batch 51 never comes (epoch 2's first call, 10 steps in). The limit the watchdog
names in its line and the last step it counted are exact; the times are margins: a batch every
0.4 s plus a step (milliseconds) and the watchdog's read interval (0.6 s at T = 6) against T."""

import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import TFDIST, clean_environ

RECIPE = Path(__file__).resolve().parents[1] / "distribute" / "blocking_pipeline.py"
T = 6


@pytest.mark.slow
def test_a_long_call_is_no_stall_and_a_hang_in_the_next_call_meets_t(tmp_path):
    args = [
        TFDIST, "train", "--keras=3", "--strategy=mirrored", f"--model_dir={tmp_path / 'run'}",
        f"--pipeline={RECIPE}", "--pipeline_option=block_pipeline=0", "--pipeline_option=delay=0.4",
        "--pipeline_option=block_after=50", "--epochs=2", "--steps_per_epoch=40",
        "--steps_per_execution=20", "--notensorboard", f"--watchdog_timeout={T}"
    ]
    try:
        # Well under the slow phase's grace (600 s), which the hang met before.
        r = subprocess.run(args,
                           capture_output=True,
                           text=True,
                           env=clean_environ(PYTHONUNBUFFERED="1"),
                           timeout=400)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"no stall named within 400 s: {(e.stderr or b'')[-3000:]}")
    out = r.stdout + r.stderr
    assert r.returncode == 124, out[-4000:]
    line = re.search(r"tfdist: error: stalled: .*$", out, re.M)
    assert line, out[-4000:]
    # Epoch 1's two calls of 8 s passed T; the hang came 10 steps into the step-40 call.
    assert re.search(rf"no training step for \d+ s \(limit {T} s\)", line.group(0)), line.group(0)
    assert re.search(r"no training step completed for \d+ s .*; last completed step 40\.", out), \
        out[-4000:]
    assert "blocking_pipeline.py" in out  # the hung read's stack
