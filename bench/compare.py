"""The one way bench/ compares two ways of training: CPU-seconds per trained sample, in
interleaved rounds, with a bootstrap interval and a verdict that follows from it.

Wall-clock time on a shared 2-core VM moves with the neighbours by +-10-20 % from minute to
minute; the CPU time the run's processes spend per trained sample moves much less, so that is
what decides. samples/s is reported beside it.

`compare(pairs, rounds, run)` runs every pair once per round, the two sides back to back and
their order alternating (A B, B A, A B, ...: "tfdist, twin, twin, tfdist"), and returns one row
per pair: the per-round ratios A/B of CPU-seconds per sample and of samples/s, their medians,
a bootstrap 95 % interval of each median, and the verdict of the CPU ratio:
- "within 2 %": the whole interval lies in [0.98, 1.02];
- "A costs X ± Y %": the interval is at most +-3 % wide (X: the median's excess, Y: half the
  interval's width), but not inside the 2 % band;
- "cannot tell: ..." with the reason (interval wider than +-3 %, or too few rounds ran).
Imports no TensorFlow.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Optional, Sequence

import numpy as np
from scipy import stats

WITHIN = 0.02  # "within 2 %": the interval inside [1 - WITHIN, 1 + WITHIN]
TELLS = 0.03  # an interval wider than +-3 % cannot tell
MIN_ROUNDS = 5  # fewer rounds that ran on both sides: no interval worth stating
CONFIDENCE = 0.95


def interval(values: Sequence[float], seed: int = 0) -> tuple[Optional[float], ...]:
    """(median, low, high): the median and its percentile-bootstrap 95 % interval."""
    values = [float(v) for v in values if v is not None]
    if not values:
        return None, None, None
    median = statistics.median(values)
    if len(values) < 2 or max(values) == min(values):
        return median, median, median
    boot = stats.bootstrap((np.array(values), ),
                           np.median,
                           confidence_level=CONFIDENCE,
                           n_resamples=10000,
                           method="percentile",
                           random_state=np.random.default_rng(seed))
    return median, float(boot.confidence_interval.low), float(boot.confidence_interval.high)


def verdict(median: Optional[float], low: Optional[float], high: Optional[float], rounds: int,
            of: int, subject: str) -> str:
    """The verdict of a cost ratio (subject's CPU per sample over the other side's)."""
    if median is None or rounds < MIN_ROUNDS:
        return f"cannot tell: {rounds} of {of} rounds ran on both sides (fewer than {MIN_ROUNDS})"
    half = (high - low) / 2
    if low >= 1 - WITHIN and high <= 1 + WITHIN:
        return "within 2 %"
    if half > TELLS:
        return (f"cannot tell: the 95 % interval {low:.3f}-{high:.3f} is +-{100 * half:.1f} %, "
                f"wider than +-{100 * TELLS:.0f} % (the rounds scatter: {rounds} rounds)")
    return f"{subject} costs {100 * (median - 1):+.1f} ± {100 * half:.1f} %"


def ratios(a_runs: dict, b_runs: dict, key: str) -> list[float]:
    """Per-round key(a) / key(b) over the rounds where both sides ran."""
    out = []
    for i in sorted(a_runs):
        a, b = a_runs[i].get(key), b_runs.get(i, {}).get(key)
        if a is not None and b:
            out.append(round(a / b, 5))
    return out


def summarize(pair: dict, a_runs: dict, b_runs: dict, rounds: int) -> dict:
    """One comparison row from the runs of its two sides (round -> measurement)."""
    cpu = ratios(a_runs, b_runs, "cpu_per_sample")
    rate = ratios(a_runs, b_runs, "samples_per_sec")
    cpu_ratio, rate_ratio = _rounded(*interval(cpu)), _rounded(*interval(rate))

    def side(runs):
        ok = [r for r in runs.values() if r.get("ok")]
        return {
            "runs_ok": len(ok),
            "cpu_per_sample_ms": _median([1000 * r["cpu_per_sample"] for r in ok]),
            "samples_per_sec": _median([r["samples_per_sec"] for r in ok]),
            "peak_rss_mb": _median([max(r["peak_rss_mb"]) for r in ok if r.get("peak_rss_mb")]),
        }

    return {
        "name":
        pair["name"],
        "group":
        pair.get("group"),
        "a":
        pair["a"]["label"],
        "b":
        pair["b"]["label"],
        "a_side":
        side(a_runs),
        "b_side":
        side(b_runs),
        "cpu_ratio":
        cpu_ratio,
        "cpu_ratio_rounds":
        cpu,
        "rate_ratio":
        rate_ratio,
        "rate_ratio_rounds":
        rate,
        "rounds":
        rounds,
        "subject":
        pair.get("subject", "A"),
        # From the interval as stored, so anyone can check it against the rule.
        "verdict":
        verdict(cpu_ratio["median"], cpu_ratio["low"], cpu_ratio["high"], len(cpu), rounds,
                pair.get("subject", "A")),
        "goal":
        pair.get("goal"),
    }


def compare(pairs: Sequence[dict],
            rounds: int,
            run: Callable[[dict, int], dict],
            log: Callable[[str], None] = print) -> list[dict]:
    """Run each pair ({"name", "a": cfg, "b": cfg, "subject", "group", "goal"}; a cfg has a
    "label") `rounds` times, interleaved, and summarize each. `run(cfg, round)` measures one run:
    {"ok", "cpu_per_sample", "samples_per_sec", ...}. Returns the rows and keeps every run in
    row["runs"]."""
    measured = {p["name"]: ({}, {}) for p in pairs}
    started = time.time()
    for i in range(rounds):
        log(f"round {i + 1}/{rounds} ({time.time() - started:.0f} s)")
        for pair in pairs:
            sides = ((0, pair["a"]), (1, pair["b"]))
            for index, cfg in (sides if i % 2 == 0 else sides[::-1]):
                measured[pair["name"]][index][i] = run(cfg, i)
    rows = []
    for pair in pairs:
        a_runs, b_runs = measured[pair["name"]]
        a_ok = {i: r for i, r in a_runs.items() if r.get("ok")}
        b_ok = {i: r for i, r in b_runs.items() if r.get("ok")}
        row = summarize(pair, a_ok, b_ok, rounds)
        row["runs"] = {
            "a": [a_runs[i] for i in sorted(a_runs)],
            "b": [b_runs[i] for i in sorted(b_runs)]
        }
        rows.append(row)
    return rows


def _median(values: list) -> Optional[float]:
    return round(statistics.median(values), 4) if values else None


def _rounded(median, low, high) -> dict:
    if median is None:
        return {"median": None, "low": None, "high": None}
    return {"median": round(median, 4), "low": round(low, 4), "high": round(high, 4)}
