"""Keras 3 under several replicas logs the epoch's loss and metrics of the whole epoch
(tfdist.keras_compat.metric_sync). Measured without the correction on Keras 3.8.0 (2026-11-28):
the first step's values (`tfdist train --model=cnn` over 2 logical CPUs logged loss 2.3082 after 20,
40 or 80 steps) and NaN after 150 steps."""

import json
import sys
from pathlib import Path

import pytest

from tests.helpers import run

SCRIPT = str(Path(__file__).parent / "metric_script.py")


@pytest.mark.slow
@pytest.mark.newest
def test_the_logged_loss_and_accuracy_are_the_epochs(tmp_path):
    out = tmp_path / "out.json"
    r = run([sys.executable, SCRIPT, str(out)], timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["replicas"] == 2, result
    logged, true = result["logged"], result["true"]
    # The model does not change (learning rate 0): the epoch's mean is the data set's, up to
    # float32 sums in another order.
    assert logged["loss"] == pytest.approx(true["loss"], rel=1e-5), result
    assert logged["accuracy"] == pytest.approx(true["accuracy"], abs=1e-6), result
