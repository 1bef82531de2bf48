"""Keras 3 with steps_per_execution > 1 under several replicas (tfdist.keras_compat.multi_step):
Keras's own loop fails at the first call there (keras-team/keras#19246); tfdist's trains the
same model as one step a call."""

import json
from pathlib import Path

import pytest

from tests.helpers import PYTHON, WAIT, run

SCRIPT = Path(__file__).resolve().parent / "multi_step_script.py"


@pytest.mark.slow
@pytest.mark.newest
def test_four_steps_a_call_train_what_one_a_call_does(tmp_path):
    """Exact: the same history, weights and evaluation (5 batches at 4 a call: a call cut short by
    the input's end keeps its step) as one step a call, with the meter's loop and without it;
    every step ran."""
    r = run([PYTHON, SCRIPT, tmp_path / "out.json"], timeout=WAIT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["replicas"] == 2
    one = result["runs"]["1"]
    assert one["iterations"] == 16
    assert set(one["history"]) >= {"loss", "accuracy", "input_wait"}  # the meter's share: timed
    for four in result["runs"]["4"], result["runs"]["4-nometer"]:
        assert four["iterations"] == 16
        for name in ("loss", "accuracy"):
            assert four["history"][name] == one["history"][name], name
        assert four["weights"] == one["weights"]
        assert four["evaluation"] == one["evaluation"]
    assert "input_wait" in result["runs"]["4"]["history"]
    assert "input_wait" not in result["runs"]["4-nometer"]["history"]
