"""bench/report.py's text of when the rows on record were measured: rows re-measured with
`--only` name their own run's date and load."""

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
import report  # noqa: E402

sys.path.remove(str(BENCH))


def data(*rows):
    return {
        "machine": {
            "date": "2026-11-28 03:44:04 +0000",
            "load_average": [0.69]
        },
        "load_average_end": [1.94],
        "rows": list(rows)
    }


def test_one_run_is_named_once():
    rows = [{"name": n} for n in ("a", "b")]  # rows of before per-row loads: the file's run
    assert report.runs_text(data(*rows)) == ("2026-11-28, load average 0.69 at the start and "
                                             "1.94 at the end")


def test_rows_of_another_run_name_theirs():
    old = {"date": "2026-11-27 10:00:00 +0000", "load_average": [2.23, 2.29]}
    new = {"date": "2026-11-28 03:44:04 +0000", "load_average": [0.69, 1.94]}
    rows = [dict(old, name="a"), dict(old, name="b"), dict(new, name="c"), dict(new, name="d")]
    text = report.runs_text(data(*rows, dict(old, name="e")))
    assert text == ("2026-11-27, load average 2.23 at the start and 2.29 at the end; c, d: "
                    "2026-11-28, load average 0.69 at the start and 1.94 at the end")
