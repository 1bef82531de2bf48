"""The one way bench/ compares two ways of training: CPU-seconds per trained sample, in
alternating slices of the two runs, with a bootstrap interval and a verdict that follows from it.

Why slices. On a shared 2-core VM the speed of the same code drifts by 10-20 % over tens of seconds
(the neighbours), and CPU time drifts with it: a run of the same script measured 0.30 and 0.36
CPU-ms per sample minutes apart, and one run moved between the two within itself. Whole runs one
after the other (A, then B, then B, then A, ...) therefore scatter by +-10 % however long each is.
So both runs are started together, brought past their warm-up, and then only one runs at a time:
the other's whole process tree is stopped (SIGSTOP). A runs for a slice (0.8 s by default), is
stopped right after a finished step, then B, then B again, then A (A B, B A, A B, ...): the two
sides of a round are measured within two seconds of each other, under the same drift, and no
round pays for start-up. Each slice measures the CPU seconds of the run's whole tree (read while
it is stopped, so it is final) and the steps rank 0 finished (bench/probe.py counts them).

`compare(pairs, rounds, start)` measures each pair that way and returns one row per pair: the
per-round ratios A/B of CPU-seconds per sample and of samples/s, their medians, a bootstrap 95 %
interval of each median, and the verdict of the CPU ratio:
- "within 2 %": the whole interval lies in [0.98, 1.02];
- "A costs X ± Y %": the interval is at most +-3 % wide (X: the median's excess, Y: half the
  interval's width), but not inside the 2 % band;
- "cannot tell: ..." with the reason (interval wider than +-3 %, or too few rounds ran).
A pair that asks for one Keras on both sides ("same_keras") is checked after the warm-up: each
run's rank 0 names the Keras its fit ran (bench/probe.py), and sides that trained different
Kerases (or one that cannot say) end the whole comparison with UnequalSettings naming both.
Imports no TensorFlow.
"""

from __future__ import annotations

import json
import mmap
import os
import signal
import statistics
import struct
import subprocess
import time
from typing import Callable, Optional, Sequence

import numpy as np
from scipy import stats

import proctree

WITHIN = 0.02  # "within 2 %": the interval inside [1 - WITHIN, 1 + WITHIN]
TELLS = 0.03  # an interval wider than +-3 % cannot tell
MIN_ROUNDS = 5  # fewer rounds that ran on both sides: no interval worth stating
CONFIDENCE = 0.95
STEP_WAIT = 60.0  # seconds a slice waits for the step (or epoch) it is in to finish


def interval(values: Sequence[float],
             seed: int = 0,
             groups: Optional[Sequence[int]] = None) -> tuple[Optional[float], ...]:
    """(median, low, high): the median and its percentile-bootstrap 95 % interval. With `groups`
    (which pair of runs each value comes from) and more than one group, a two-level bootstrap:
    each resample draws the pairs of runs with replacement, then the rounds within each drawn pair,
    so the interval also holds what differs from one pair of runs to the next."""
    if groups is None:
        groups = [0] * len(values)
    kept = [(float(v), g) for v, g in zip(values, groups) if v is not None]
    values = [v for v, _ in kept]
    if not values:
        return None, None, None
    median = statistics.median(values)
    if len(values) < 2 or max(values) == min(values):
        return median, median, median
    by_group: dict = {}
    for v, g in kept:
        by_group.setdefault(g, []).append(v)
    if len(by_group) == 1:
        boot = stats.bootstrap((np.array(values), ),
                               np.median,
                               confidence_level=CONFIDENCE,
                               n_resamples=10000,
                               method="percentile",
                               random_state=np.random.default_rng(seed))
        return median, float(boot.confidence_interval.low), float(boot.confidence_interval.high)
    rng = np.random.default_rng(seed)
    samples = [np.array(v) for v in by_group.values()]
    medians = np.empty(10000)
    for i in range(len(medians)):
        drawn = rng.integers(len(samples), size=len(samples))
        medians[i] = np.median(
            np.concatenate([rng.choice(samples[g], size=len(samples[g])) for g in drawn]))
    tail = 100 * (1 - CONFIDENCE) / 2
    return median, float(np.percentile(medians, tail)), float(np.percentile(medians, 100 - tail))


def verdict(median: Optional[float],
            low: Optional[float],
            high: Optional[float],
            rounds: int,
            of: int,
            subject: str,
            gain: bool = False,
            tells: float = TELLS) -> str:
    """The verdict of a cost ratio (subject's CPU per sample over the other side's). `gain`: a
    row that measures a gain (not a cost within a few per cent): a whole interval below 1 is a
    saving however wide. `tells`: the widest half-interval that still tells a cost (a quick
    run's rows: 5 %)."""
    if median is None or rounds < MIN_ROUNDS:
        return f"cannot tell: {rounds} of {of} rounds ran on both sides (fewer than {MIN_ROUNDS})"
    half = (high - low) / 2
    if low >= 1 - WITHIN and high <= 1 + WITHIN:
        return "within 2 %"
    if gain and high < 1:
        return f"{subject} saves {100 * (1 - median):.1f} ± {100 * half:.1f} %"
    if half > tells:
        return (f"cannot tell: the 95 % interval {low:.3f}-{high:.3f} is +-{100 * half:.1f} %, "
                f"wider than +-{100 * tells:.0f} % (the rounds scatter: {rounds} rounds)")
    if high < 1 or median < 1:  # the whole interval, or its median, below: less CPU a sample
        return f"{subject} saves {100 * (1 - median):.1f} ± {100 * half:.1f} %"
    return f"{subject} costs {100 * (median - 1):+.1f} ± {100 * half:.1f} %"


def ratios(a_runs: dict, b_runs: dict, key: str) -> tuple[list[float], list[int]]:
    """Per-round key(a) / key(b) over the rounds where both sides ran, and which pair of runs
    each round is from."""
    out, groups = [], []
    for i in sorted(a_runs):
        a, b = a_runs[i].get(key), b_runs.get(i, {}).get(key)
        if a is not None and b:
            out.append(round(a / b, 5))
            groups.append(a_runs[i].get("run_pair", 0))
    return out, groups


def summarize(pair: dict, a_runs: dict, b_runs: dict, rounds: int) -> dict:
    """One comparison row from the runs of its two sides (round -> measurement)."""
    cpu, groups = ratios(a_runs, b_runs, "cpu_per_sample")
    rate, rate_groups = ratios(a_runs, b_runs, "samples_per_sec")
    cpu_ratio = _rounded(*interval(cpu, groups=groups))
    rate_ratio = _rounded(*interval(rate, groups=rate_groups))

    def side(runs):
        ok = [r for r in runs.values() if r.get("ok")]
        return {
            "runs_ok": len(ok),
            "cpu_per_sample_ms": _median([1000 * r["cpu_per_sample"] for r in ok]),
            "samples_per_sec": _median([r["samples_per_sec"] for r in ok]),
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
        "run_pairs":
        len(set(groups)),
        "round_run_pairs":
        groups,
        "rounds":
        rounds,
        "subject":
        pair.get("subject", "A"),
        # From the interval as stored, so anyone can check it against the rule.
        "verdict":
        verdict(cpu_ratio["median"],
                cpu_ratio["low"],
                cpu_ratio["high"],
                len(cpu),
                rounds,
                pair.get("subject", "A"),
                gain=pair.get("group") == "gain",
                tells=pair.get("tells", TELLS)),
        "tells":
        pair.get("tells", TELLS),
        "goal":
        pair.get("goal"),
    }


class RunFailed(Exception):
    pass


class UnequalSettings(Exception):
    """The two sides of a comparison that must train alike did not: nothing it measured would
    mean what its row says."""


class Run:
    """A started run: the processes the driver started (bench/common.py's start: each carries a
    tag its own processes inherit, bench/proctree.py), rank 0's count of
    finished steps (the 8 bytes of `steps_file`, written by bench/probe.py), the samples one of
    those steps trains, the run's log, and rank 0's probe record (OUT_PREFIX.rank0.json), if
    any."""

    def __init__(self,
                 procs: Sequence[subprocess.Popen],
                 steps_file: str,
                 samples_per_step: int,
                 log: str,
                 record: Optional[str] = None):
        self.procs, self.samples_per_step, self.log = list(procs), samples_per_step, log
        self.record = record
        with open(steps_file, "rb") as f:
            self._steps = mmap.mmap(f.fileno(), 8, access=mmap.ACCESS_READ)

    def keras(self) -> Optional[str]:
        """The Keras rank 0's fit ran ("tf-keras 2.18.0", "Keras 3.15.1"; bench/probe.py writes
        it at the end of the first step), or None where not known."""
        return self.recorded("keras")

    def recorded(self, key: str):
        """What rank 0's bench/probe.py record holds under `key` now, or None."""
        if not self.record or not os.path.exists(self.record):
            return None
        with open(self.record) as f:
            return json.load(f).get(key)

    @property
    def tags(self) -> list[str]:
        """The tags of its processes (bench/proctree.py), one per process the driver started."""
        return [p.run_tag for p in self.procs]

    def steps(self) -> int:
        return struct.unpack_from("<q", self._steps)[0]

    def check(self, label: str) -> None:
        """Raise RunFailed if a root process ended: a measured run trains until it is killed."""
        ended = [p.returncode for p in self.procs if p.poll() is not None]
        if ended:
            raise RunFailed(
                f"{label} ended (status {ended}) at step {self.steps()}: see {self.log}")


def steps_file(path: str) -> str:
    """An 8-byte step counter for bench/probe.py ($BENCH_STEPS_FILE), zeroed."""
    with open(path, "wb") as f:
        f.write(bytes(8))
    return path


def stop_after_step(run: Run, label: str, within: float) -> None:
    """Let the run finish the step it is in, then stop its tree: every slice holds whole steps."""
    last, deadline = run.steps(), time.monotonic() + within
    while run.steps() == last and time.monotonic() < deadline:
        time.sleep(0.0002)
    if not proctree.stop(run.tags):
        raise RunFailed(f"{label}: a process did not stop: see {run.log}")


def warm_up(runs: dict, warm_steps: int, timeout: float) -> None:
    """Both runs train at once until each has finished `warm_steps` (graph tracing and the first
    epoch's end behind it); then both are stopped. The first there trains on meanwhile: stopped
    for as long as the other's warm-up (tfdist's `auto` re-traces after the first epoch), a
    hand-written multi_worker run failed its peers' heartbeat check when continued (TensorFlow's
    coordination service: 'heartbeat timeout', 2026-11-28)."""
    deadline = time.monotonic() + timeout
    while True:
        for label, run in runs.items():
            run.check(label)
        waiting = [label for label, run in runs.items() if run.steps() < warm_steps]
        if not waiting:
            break
        if time.monotonic() > deadline:
            raise RunFailed(f"{', '.join(waiting)} did not finish {warm_steps} steps in "
                            f"{timeout:.0f} s: see {runs[waiting[0]].log}")
        time.sleep(0.02)
    for label, run in runs.items():
        stop_after_step(run, label, within=timeout)


def check_same_keras(pair: dict, runs: dict) -> dict:
    """Each side's Keras ({"a": ..., "b": ...}); with pair["same_keras"], UnequalSettings unless
    both are known and the same."""
    kerases = {label: run.keras() for label, run in runs.items()}
    if pair.get("same_keras") and (None in kerases.values() or kerases["a"] != kerases["b"]):
        raise UnequalSettings(
            f"{pair['name']}: the sides trained different Kerases: {pair['a']['label']} "
            f"{kerases['a'] or 'unknown'}, {pair['b']['label']} {kerases['b'] or 'unknown'} "
            f"(logs: {runs['a'].log}, {runs['b'].log})")
    return kerases


def measure_slice(run: Run, label: str, seconds: float) -> dict:
    """Continue the stopped run for about `seconds`, stop it after a finished step, and return
    what the slice cost: CPU seconds of the whole tree, steps, wall seconds."""
    cpu0, _ = proctree.cpu_seconds(run.tags)
    steps0, wall0 = run.steps(), time.monotonic()
    proctree.resume(run.tags)
    time.sleep(seconds)
    stop_after_step(run, label, within=STEP_WAIT)
    wall = time.monotonic() - wall0
    cpu1, processes = proctree.cpu_seconds(run.tags)
    run.check(label)
    if not processes:  # nothing stopped nor counted: the slices would mean nothing
        raise RunFailed(f"{label}: none of its processes found by their tag (bench/proctree.py)")
    steps = run.steps() - steps0
    if steps <= 0:
        raise RunFailed(f"{label} finished no step in a {wall:.1f} s slice: see {run.log}")
    samples = steps * run.samples_per_step
    return {
        "ok": True,
        "steps": steps,
        "wall_s": round(wall, 4),
        "cpu_seconds": round(cpu1 - cpu0, 3),
        "cpu_per_sample": (cpu1 - cpu0) / samples,
        "samples_per_sec": round(samples / wall, 2),
        "processes": processes,
    }


def compare(pairs: Sequence[dict],
            rounds: int,
            start: Callable[[dict], Run],
            slice_seconds: float = 1.0,
            warm_steps: int = 100,
            timeout: float = 300.0,
            log: Callable[[str], None] = print,
            deadline: Optional[float] = None,
            least: Callable[[dict], float] = lambda pair: 0.0) -> list[dict]:
    """Measure each pair ({"name", "a": cfg, "b": cfg, "subject", "group", "goal"}; a cfg has a
    "label"; a pair may set its own "rounds", and "run_pairs": over how many fresh pairs of runs
    the rounds are split, 1 by default) in `rounds` rounds of alternating slices and summarize
    each. With "max_run_pairs" a pair whose CPU-ratio interval is still wider than +-3 % after
    those gets more pairs of runs (as many rounds each), up to that many in all: the time goes to
    the rows that need it. `start(cfg)` starts a run that trains until killed. Returns the rows,
    every slice kept in row["runs"] (with the pair of runs it is from), and each side's Keras in
    row["a_side"]["keras"] and row["b_side"]["keras"]. UnequalSettings (pair["same_keras"]: the
    sides trained different Kerases) ends the comparison, its runs ended first. With `deadline`
    (time.monotonic()'s), a pair gets a pair of runs beyond its "run_pairs" only where one more
    (as long as its others took) and the `least` seconds of every pair after it end by then."""
    rows = []
    for j, pair in enumerate(pairs):
        n, run_pairs = pair.get("rounds", rounds), pair.get("run_pairs", 1)
        most = max(run_pairs, pair.get("max_run_pairs", run_pairs))
        started = time.monotonic()
        measured: tuple[dict, dict] = ({}, {})
        error, memory, kerases, calls = None, {}, {}, {}
        i = 0
        for k in range(most):  # the rounds split over fresh pairs of runs
            if k >= run_pairs and _tells(measured, pair.get("tells", TELLS)):
                break
            if k >= run_pairs and deadline is not None:
                now = time.monotonic()  # one more pair of runs, as long as the others took
                if now + (now - started) / k + sum(least(p) for p in pairs[j + 1:]) > deadline:
                    log(f"  {pair['name']}: no pair of runs more: the time is up ({k} pairs)")
                    break
            runs: dict = {}
            try:
                for label in ("a", "b"):
                    runs[label] = start(pair[label])
                warm_up(runs, warm_steps, timeout)
                kerases = check_same_keras(pair, runs)
                for _ in range(n // run_pairs + (k < n % run_pairs)):
                    order = ((0, "a"), (1, "b")) if i % 2 == 0 else ((1, "b"), (0, "a"))
                    for index, label in order:
                        slice_ = measure_slice(runs[label], label, slice_seconds)
                        measured[index][i] = dict(slice_, run_pair=k)
                    i += 1
                memory = {label: proctree.peak_rss_mb(run.tags) for label, run in runs.items()}
                calls = {label: run.recorded("steps_per_call") for label, run in runs.items()}
            except RunFailed as e:
                error = str(e)
                log(f"  {pair['name']}: FAILED: {error}")
            finally:
                for run in runs.values():
                    proctree.kill(run.tags)
                    for p in run.procs:
                        try:
                            p.wait(timeout=STEP_WAIT)
                        except subprocess.TimeoutExpired:  # its tree not found: its group
                            error = error or f"{p.args[0]}'s processes not found to end"
                            if p.pid > 1:  # its own session (bench/common.py): group = pid
                                os.killpg(p.pid, signal.SIGKILL)
                            p.wait()
            if error:
                break
        row = summarize(pair, *measured, max(i, n) if error else i)
        row.update(error=error,
                   seconds=round(time.monotonic() - started, 1),
                   runs={
                       "a": [measured[0][i] for i in sorted(measured[0])],
                       "b": [measured[1][i] for i in sorted(measured[1])]
                   })
        for label in ("a", "b"):
            row[f"{label}_side"].update(peak_rss_mb=memory.get(label),
                                        keras=kerases.get(label),
                                        steps_per_call=calls.get(label))
            if "auto" in row[label] and calls.get(label):  # the count tfdist chose
                row[label] += f" (chose {calls[label]})"
        c, r = row["cpu_ratio"], row["rate_ratio"]
        log(f"  {pair['name']}: CPU/sample {c['median']} [{c['low']}, {c['high']}], samples/s "
            f"{r['median']} [{r['low']}, {r['high']}]: {row['verdict']} ({row['seconds']:.0f} s)")
        rows.append(row)
    return rows


def _tells(measured: tuple[dict, dict], tells: float) -> bool:
    """Whether the CPU ratio's interval so far is at most +-`tells` wide (the pair's own)."""
    cpu, groups = ratios(*measured, "cpu_per_sample")
    _, low, high = interval(cpu, groups=groups)
    return low is not None and (high - low) / 2 <= tells


def _median(values: list) -> Optional[float]:
    return round(statistics.median(values), 4) if values else None


def _rounded(median, low, high) -> dict:
    if median is None:
        return {"median": None, "low": None, "high": None}
    return {"median": round(median, 4), "low": round(low, 4), "high": round(high, 4)}
