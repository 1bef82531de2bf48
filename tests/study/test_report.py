"""Speed-up, efficiency and the table of a study (pure functions on a study's rows)."""

import pytest

from tfdist.study.report import add_scaling, table


def study(rows):
    return {"strategy": "horovod", "scaling": "weak", "timed_steps": 30, "results": rows}


def row(size, rate, **extra):
    return dict(
        dict(size=size,
             layout=f"1x{size}",
             global_batch_size=32 * size,
             learning_rate=0.05 * size,
             samples_per_sec=rate,
             time_per_epoch=1437 / rate,
             input_wait=0.05,
             epoch_samples_per_sec=[rate * 0.9, rate * 1.1]), **extra)


def test_efficiency_is_the_speed_up_over_the_ideal_one_from_the_smallest_measured_size():
    s = study([
        row(2, 1000.0),
        dict(size=4,
             layout="1x4",
             global_batch_size=128,
             learning_rate=0.2,
             samples_per_sec=None,
             error="exit status 1 (log: x)"),
        row(8, 3000.0),
    ])
    add_scaling(s)
    r2, r4, r8 = s["results"]
    assert s["base_size"] == 2
    assert (r2["speedup"], r2["efficiency"]) == (1.0, 1.0)
    assert r8["speedup"] == 3.0 and r8["efficiency"] == pytest.approx(0.75)
    assert r8["ideal_samples_per_sec"] == 4000.0
    assert r4["efficiency"] is None
    text = table(s)
    assert "FAILED: exit status 1 (log: x)" in text
    line8 = next(line for line in text.splitlines() if line.lstrip().startswith("8 "))
    assert line8.split() == [
        "8", "1x8", "256", "0.4", "3000", "±10%", "0.48", "s", "3.00", "75%", "5.0%"
    ]


def test_no_size_measured_leaves_no_base():
    s = study([
        dict(size=1,
             layout="1x1",
             global_batch_size=32,
             learning_rate=0.05,
             error="killed by SIGKILL")
    ])
    add_scaling(s)
    assert s["base_size"] is None and s["results"][0]["speedup"] is None
