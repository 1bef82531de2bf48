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
    every step ran. On a finite input of 10 batches at 4 a call the last call of each epoch runs
    2 steps (tfdist.keras_compat.call_steps): one asking for a batch past the end counted an
    optimizer step more per epoch (22 iterations against 20, Adam's weights other: seen before
    call_steps, 2026-11-28)."""
    r = run([PYTHON, SCRIPT, tmp_path / "out.json"], timeout=WAIT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["replicas"] == 2
    for data, steps in ("repeated", 16), ("finite", 20):
        one = result["runs"][f"{data}/1"]
        assert one["iterations"] == steps
        assert set(one["history"]) >= {"loss", "accuracy", "input_wait"}  # the meter's share
        for four in result["runs"][f"{data}/4"], result["runs"][f"{data}/4-nometer"]:
            assert four["iterations"] == steps, data
            for name in ("loss", "accuracy"):
                assert four["history"][name] == one["history"][name], (data, name)
            assert four["weights"] == one["weights"], data
            assert four["evaluation"] == one["evaluation"], data
        assert "input_wait" in result["runs"][f"{data}/4"]["history"]  # timed in the meter's loop
        assert "input_wait" not in result["runs"][f"{data}/4-nometer"]["history"]
