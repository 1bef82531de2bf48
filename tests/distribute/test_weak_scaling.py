"""`tfdist.init(weak_scaling=True)` on 2 devices, both Kerases: fit's batch_size is each
replica's (an epoch of 1280 samples at batch_size=32 takes 20 steps of 64, not 40), the rate
doubled once (linear, 2 replicas) however often the script compiles, and a tf.data.Dataset,
whose batch fit cannot change, refused with the fix."""

import json
import sys
from pathlib import Path

import pytest

from tests.helpers import keras_environ, run

# Newest stack: no. What it checks is tfdist's own arithmetic on fit's and compile's arguments
# (the hooks themselves run on both stacks in test_two_lines.py).
pytestmark = [pytest.mark.slow, pytest.mark.default_stack]
SCRIPT = str(Path(__file__).parent / "weak_scaling_script.py")


@pytest.mark.parametrize("keras", [2, 3])
def test_batch_per_replica_and_rate_scaled(keras):
    r = run([sys.executable, SCRIPT, str(keras)], env=keras_environ(keras))
    assert r.returncode == 0, r.stderr[-3000:]
    line = next(s for s in r.stdout.splitlines() if s.startswith("weak_scaling: "))
    said = json.loads(line.split(": ", 1)[1])
    assert said["steps"] == 20, said
    assert said["rate"] == pytest.approx(0.2), said
    assert said["refused"].startswith(
        "WeakScalingError: weak_scaling=True multiplies fit's batch_size by the 2 replicas, but "
        "fit's x is a tf.data.Dataset"), said
    assert "weak scaling: each of the 2 replicas takes fit's batch_size; the rate times 2" in (
        r.stdout + r.stderr)
