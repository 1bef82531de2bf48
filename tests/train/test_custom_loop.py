"""A custom training loop (`rt.strategy.run` of a GradientTape step, no `model.fit`) under
`multi_worker`, on both Kerases: both ranks take the same steps and end with the same model."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import TFDIST, clean_environ

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("custom_loop_script.py")


@pytest.mark.parametrize("legacy,package", [(None, "keras"), ("1", "tf_keras")])
def test_custom_loop_trains_the_same_model_on_both_workers(legacy, package):
    env = clean_environ()
    env.pop("TF_USE_LEGACY_KERAS", None)  # TensorFlow's default: tf.keras is Keras 3
    if legacy:
        env["TF_USE_LEGACY_KERAS"] = legacy  # the user's switch: tf-keras
    r = subprocess.run(
        [TFDIST, "launch", "-n", "2", "--strategy=multi_worker", "--", sys.executable,
         str(SCRIPT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    losses = {
        rank: [float(v) for v in re.findall(rf"^\[{rank}\] LOSS \d+ (\S+)$", r.stdout, re.M)]
        for rank in (0, 1)
    }
    results = {
        rank: line.split()
        for rank, line in re.findall(r"^\[(\d)\] RESULT (.*)$", r.stdout, re.M)
    }
    assert losses[0] == losses[1] and len(losses[0]) == 4, r.stdout[-3000:]
    # The mean squared error of a linear target fell 20x (tf-keras) and 38x (Keras 3) over 4
    # epochs here (2026-11-26); a quarter is far from either.
    assert losses[0][-1] < losses[0][0] / 4, losses
    assert results["0"][:2] == [package, "multi_worker"], results
    assert results["0"][3:] == results["1"][3:] and len(results["0"]) == 3 + 4, results
