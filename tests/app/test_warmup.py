"""The learning rate applied in each warmup step follows lr + (N*lr - lr) * step / warmup_steps,
on both Kerases."""

import json
import sys
from pathlib import Path

import pytest

from tests.helpers import keras_environ, launch, requires_horovod
from tfdist.app.schedules import warmup_schedule

SCRIPT = str(Path(__file__).parent / "warmup_script.py")


def expected(lr, n, warmup_steps, total):
    return [
        lr + (n * lr - lr) * k / warmup_steps if k < warmup_steps else n * lr for k in range(total)
    ]


@pytest.mark.parametrize("keras", [2, 3])
def test_schedule_formula(keras):
    WarmupSchedule = warmup_schedule(keras)
    assert WarmupSchedule is warmup_schedule(keras)  # one class a Keras: registered once
    s = WarmupSchedule(0.1, 0.4, 4, "cosine", total_steps=8)
    assert [round(float(s(k)), 6)
            for k in range(9)] == [0.1, 0.175, 0.25, 0.325, 0.4, 0.341421, 0.2, 0.058579, 0.0]
    s = WarmupSchedule(0.1, 0.4, 2, "step", decay_steps=2, decay_rate=0.5)
    assert [round(float(s(k)), 6) for k in range(7)] == [0.1, 0.25, 0.4, 0.4, 0.2, 0.2, 0.1]
    with pytest.raises(ValueError, match=r"schedule='linear': expected one of constant, cosine"):
        WarmupSchedule(0.1, 0.2, 1, "linear")


@pytest.mark.slow
@pytest.mark.parametrize("keras", [2, 3])
@pytest.mark.parametrize(
    "strategy",
    [
        # Newest stack: Horovod only, the rate read through its DistributedOptimizer; the plain
        # optimizer applies the same schedule (tfdist's WarmupSchedule, test_schedule_formula).
        pytest.param("multi_worker", marks=pytest.mark.default_stack),
        pytest.param("horovod", marks=[pytest.mark.horovod, requires_horovod]),
    ])
def test_warmup_per_step_under_two_workers(strategy, keras, tmp_path, monkeypatch):
    out = tmp_path / "lr.json"
    # tf.keras in the script: tf-keras with the switch exported, Keras 3 without it (dropped
    # here, where tests/conftest.py exports it).
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    r = launch(2, sys.executable, SCRIPT, strategy, str(out), env=keras_environ(keras))
    assert r.returncode == 0, r.stdout[-3000:]
    for rank in (0, 1):
        data = json.loads(Path(f"{out}.{rank}").read_text())
        assert (data["replicas"], data["keras"]) == (2, keras)
        # warmup 1.5 epochs of 6 steps = 9 steps, from 0.1 to 0.2 (linear scaling, 2 replicas);
        # the rate of step k is the one its update applied (warmup_script.py)
        assert data["rates"] == pytest.approx(expected(0.1, 2, 9, 12), rel=1e-6)
