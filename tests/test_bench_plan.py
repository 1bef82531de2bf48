"""bench/training.py's plan of a plain `make bench`: the comparisons longest since measured that
fit in its minutes, priced at what each took last, the others kept on record (no processes)."""

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
import training  # noqa: E402

sys.path.remove(str(BENCH))

pytestmark = pytest.mark.default_stack  # bench's own logic: no TensorFlow

OLD, NEW = "2026-11-27 17:50:52 +0000", "2026-11-28 14:30:57 +0000"


def record(*rows):
    """overhead.json with `rows` (name, date, seconds), two of them of different shapes so that
    row_costs can price a row without a record."""
    return {
        "machine": {
            "date": OLD
        },
        "setup": {
            "slice_seconds": 0.8
        },
        "rows": [
            dict(name=name, date=date, seconds=seconds, rounds=24, run_pairs=4, slice_seconds=0.8)
            for name, date, seconds in rows
        ] + [
            dict(name="priced/a", date=NEW, seconds=80.0, rounds=16, run_pairs=1),
            dict(name="priced/b", date=NEW, seconds=120.0, rounds=24, run_pairs=4)
        ]
    }


def todo(*names):
    return [dict(name=n, group="twin", rounds=24, run_pairs=4)
            for n in names] + [dict(name="weak/x", group="weak", rounds=5)]


def chosen(todo_, previous, minutes):
    args = training.arguments([])
    measured, kept = training.budgeted(todo_, previous, minutes, args)
    return [p["name"] for p in measured], [p["name"] for p in kept]


def test_the_longest_since_measured_first_at_what_they_took():
    previous = record(("a", NEW, 100.0), ("b", OLD, 100.0), ("c", OLD, 100.0), ("d", NEW, 30.0))
    # 250 s: b and c (the oldest, 200 s), then a no longer fits but d (30 s) does.
    assert chosen(todo("a", "b", "c", "d"), previous, 250 / 60) == (["b", "c", "d",
                                                                     "weak/x"], ["a"])
    # Everything fits: nothing kept (the weak-scaling rows are always measured, in their place).
    assert chosen(todo("a", "b", "c", "d"), previous, 60) == (["a", "b", "c", "d", "weak/x"], [])


def test_a_row_never_measured_comes_first_and_one_row_always_runs():
    previous = record(("a", OLD, 100.0))
    measured, kept = chosen(todo("a", "new"), previous, 0.5)  # 30 s: not even the new row fits
    assert measured == ["new", "weak/x"] and kept == ["a"]
    # A row whose record failed counts as never measured.
    previous["rows"][0]["error"] = "died"
    assert chosen(todo("a", "new"), previous, 0.5)[0][0] == "a"


def test_without_a_record_to_price_rows_everything_runs():
    assert chosen(todo("a", "b"), None, 1) == (["a", "b", "weak/x"], [])


def test_only_all_and_quick_measure_their_rows_whole():
    for argv in (["--all"], ["--quick"], ["--only=mirrored/"]):
        assert training.budget_seconds(training.arguments(argv)) is None
    assert training.budget_seconds(training.arguments([])) == training.BUDGET_MINUTES * 60


def test_the_quick_run_is_the_equal_settings_rows_told_to_five_per_cent():
    args = training.arguments(["--quick"])
    todo = training.todo_pairs(args)
    assert todo and {p["group"] for p in todo} == {"twin"}
    assert [p["name"] for p in todo] == [p["name"] for p in training.twin_pairs()]
    assert all(p["tells"] == 0.05 and p["run_pairs"] == p["max_run_pairs"] == 2 for p in todo)
    assert args.rounds == 12 and args.startup_rounds == 0


def test_a_quick_rows_verdict_tells_a_cost_to_five_per_cent():
    sys.path.insert(0, str(BENCH))
    try:
        import compare
    finally:
        sys.path.remove(str(BENCH))
    assert compare.verdict(1.03, 0.99, 1.07, 12, 12, "tfdist").startswith("cannot tell")
    assert compare.verdict(1.03, 0.99, 1.07, 12, 12, "tfdist",
                           tells=0.05) == "tfdist costs +3.0 ± 4.0 %"
    assert compare.verdict(1.03, 0.97, 1.09, 12, 12, "tfdist",
                           tells=0.05).endswith("wider than +-5 % (the rounds scatter: 12 rounds)")
