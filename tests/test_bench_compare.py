"""bench/compare.py and bench/proctree.py on real processes (no TensorFlow): stopping a process tree
freezes its CPU time, and the alternating slices measure a known cost ratio. The workers are
Python loops that count their steps into the steps file as bench/probe.py does."""

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
import common  # noqa: E402
import compare  # noqa: E402
import proctree  # noqa: E402

sys.path.remove(str(BENCH))

# No TensorFlow; wall-clock rates are compared: no other test beside them.
pytestmark = [pytest.mark.default_stack, pytest.mark.alone]

# `work` loop iterations per step; a child of the same kind when asked (a tree of two).
WORKER = textwrap.dedent("""
    import mmap, os, struct, subprocess, sys
    work, child = int(sys.argv[1]), sys.argv[2:] == ["child"]
    if child:
        env = dict(os.environ, BENCH_STEPS_FILE="")  # the child counts nothing
        subprocess.Popen([sys.executable, __file__, str(work)], env=env)
    path = os.environ.get("BENCH_STEPS_FILE")
    counter = None
    if path:
        with open(path, "r+b") as f:
            counter = mmap.mmap(f.fileno(), 8)
    steps = 0
    while True:
        x = 0
        for i in range(work):
            x += i * i
        steps += 1
        if counter is not None:
            struct.pack_into("<q", counter, 0, steps)
""")


@pytest.fixture
def worker(tmp_path):
    path = tmp_path / "worker.py"
    path.write_text(WORKER)
    return path


def start_worker(worker, tmp_path, work, child=False):
    steps = compare.steps_file(str(tmp_path / f"steps-{work}-{time.monotonic_ns()}"))
    log = str(tmp_path / "worker.log")
    command = [sys.executable, str(worker), str(work)] + (["child"] if child else [])
    proc = common.start(command, dict(os.environ, BENCH_STEPS_FILE=steps), log)
    return compare.Run([proc], steps, samples_per_step=1, log=log)


def measure(pair, start, rounds, slice_seconds):
    """compare.compare on one pair, quietly, after a warm-up of 3 steps: its row."""
    row, = compare.compare([pair],
                           rounds=rounds,
                           start=start,
                           slice_seconds=slice_seconds,
                           warm_steps=3,
                           log=lambda line: None)
    return row


def wait_for(condition, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_stopped_tree_spends_no_cpu_and_resumes(worker, tmp_path):
    run = start_worker(worker, tmp_path, 2000, child=True)
    try:
        wait_for(lambda: len(proctree.members(run.tags)) == 2, "the child started")
        wait_for(lambda: run.steps() > 3, "steps counted")
        assert proctree.stop(run.tags)
        states = {state for state, _ in proctree.members(run.tags).values()}
        assert states <= {"T", "t"}, states
        cpu, processes = proctree.cpu_seconds(run.tags)
        steps = run.steps()
        time.sleep(0.3)  # stopped: nothing may move however long this is
        assert proctree.cpu_seconds(run.tags) == (cpu, processes) and processes == 2
        assert run.steps() == steps
        proctree.resume(run.tags)
        wait_for(lambda: run.steps() > steps, "steps resume")
        wait_for(lambda: proctree.cpu_seconds(run.tags)[0] > cpu, "CPU time resumes")
    finally:
        proctree.kill(run.tags)
        run.procs[0].wait()
    wait_for(lambda: not proctree.members(run.tags), "the whole tree killed")


def test_slices_measure_a_known_cost_ratio(worker, tmp_path):
    """A does twice B's work per step: the CPU ratio of the slices is about 2, samples/s about
    1/2, and every run is gone afterwards. (Wide bounds: CPU time per unit of work itself moves
    with whatever else the machine runs; the slices are short.)"""
    started = []

    def start(cfg):
        started.append(start_worker(worker, tmp_path, cfg["work"]))
        return started[-1]

    pair = dict(name="known",
                subject="A",
                a=dict(label="a", work=40000),
                b=dict(label="b", work=20000))
    row = measure(pair, start, rounds=8, slice_seconds=0.3)
    assert row["error"] is None
    assert len(row["runs"]["a"]) == len(row["runs"]["b"]) == 8
    assert len(row["cpu_ratio_rounds"]) == 8
    assert 1.4 < row["cpu_ratio"]["median"] < 2.8, row["cpu_ratio_rounds"]
    assert row["cpu_ratio"]["low"] <= row["cpu_ratio"]["median"] <= row["cpu_ratio"]["high"]
    assert 1 / 2.8 < row["rate_ratio"]["median"] < 1 / 1.4, row["rate_ratio_rounds"]
    assert row["verdict"] == compare.verdict(row["cpu_ratio"]["median"], row["cpu_ratio"]["low"],
                                             row["cpu_ratio"]["high"], 8, 8, "A")
    for run in started:
        assert run.procs[0].poll() is not None
        assert not proctree.members(run.tags)


def test_a_run_that_dies_gives_a_row_that_says_so(worker, tmp_path):

    def start(cfg):
        if cfg["label"] == "b":
            log = str(tmp_path / "dies.log")
            proc = common.start([sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ))
            return compare.Run([proc], compare.steps_file(str(tmp_path / "dies")), 1, log)
        return start_worker(worker, tmp_path, 2000)

    pair = dict(name="dies", a=dict(label="a"), b=dict(label="b"))
    row = measure(pair, start, rounds=6, slice_seconds=0.2)
    assert "b ended (status [3])" in row["error"]
    assert row["verdict"] == "cannot tell: 0 of 6 rounds ran on both sides (fewer than 5)"


def test_verdicts_follow_from_the_interval():
    assert compare.verdict(1.0, 0.985, 1.015, 9, 9, "tfdist") == "within 2 %"
    assert compare.verdict(1.05, 1.03, 1.07, 9, 9, "tfdist") == "tfdist costs +5.0 ± 2.0 %"
    assert compare.verdict(0.7, 0.68, 0.72, 9, 9, "N a call") == "N a call saves 30.0 ± 2.0 %"
    assert compare.verdict(0.985, 0.97, 0.999, 9, 9, "tfdist") == "tfdist saves 1.5 ± 1.5 %"
    # Across 1, the median below it: a saving of so much, give or take (was "costs -4.0 %").
    assert compare.verdict(0.97, 0.95, 1.005, 9, 9, "tfdist") == "tfdist saves 3.0 ± 2.7 %"
    assert compare.verdict(
        1.0, 0.95, 1.05, 9, 9,
        "tfdist").startswith("cannot tell: the 95 % interval 0.950-1.050 is +-5.0 %")
    assert compare.verdict(1.0, 1.0, 1.0, 4, 9, "tfdist").startswith("cannot tell: 4 of 9")
    # A gain row: an interval wholly below 1 is a saving, however wide.
    assert compare.verdict(0.836, 0.798, 0.872, 16, 16, "auto",
                           gain=True) == "auto saves 16.4 ± 3.7 %"
    assert compare.verdict(0.836, 0.798, 0.872, 16, 16, "auto").startswith("cannot tell")
    assert compare.verdict(0.95, 0.90, 1.01, 16, 16, "auto", gain=True).startswith("cannot tell")


def test_the_interval_holds_what_differs_between_pairs_of_runs():
    """Two pairs of runs whose rounds agree within each but differ by 6 % between them: the
    two-level bootstrap's interval reaches past both pairs' medians, the rounds-only one does
    not."""
    rng = [0.995, 1.0, 1.005, 0.998, 1.002, 1.001, 0.999, 1.003]
    values = rng + [v + 0.06 for v in rng]
    groups = [0] * len(rng) + [1] * len(rng)
    median, low, high = compare.interval(values, groups=groups)
    _, flat_low, flat_high = compare.interval(values)
    assert low <= 1.0 and high >= 1.06
    assert high - low > flat_high - flat_low


def test_a_row_gets_more_pairs_of_runs_only_while_it_cannot_tell(worker, tmp_path):
    """max_run_pairs: one more pair of runs only while the CPU-ratio interval of those so far is
    wider than +-3 %. A against a copy of itself (a ratio of 1): checked against the rule on the
    rounds as stored; then with a rule no interval meets, every allowed pair of runs runs."""
    started = []

    def start(cfg):
        started.append(start_worker(worker, tmp_path, cfg["work"]))
        return started[-1]

    def wide(row, pairs):  # the rule, on the rounds of the first `pairs` pairs of runs
        kept = [(v, g) for v, g in zip(row["cpu_ratio_rounds"], row["round_run_pairs"])
                if g < pairs]
        _, low, high = compare.interval([v for v, _ in kept], groups=[g for _, g in kept])
        return (high - low) / 2 > compare.TELLS

    pair = dict(name="same",
                a=dict(label="a", work=20000),
                b=dict(label="b", work=20000),
                run_pairs=1,
                max_run_pairs=3)
    row = measure(pair, start, rounds=6, slice_seconds=0.2)
    ran = row["run_pairs"]
    assert row["rounds"] == 6 * ran == len(row["cpu_ratio_rounds"]) and len(started) == 2 * ran
    assert all(wide(row, k) for k in range(1, ran)), row["round_run_pairs"]
    assert ran == 3 or not wide(row, ran), row["cpu_ratio"]
    tells = compare.TELLS
    try:
        compare.TELLS = -1.0  # no interval is ever narrow enough (equal ratios give a width of 0)
        row = measure(pair, start, rounds=6, slice_seconds=0.2)
    finally:
        compare.TELLS = tells
    assert row["run_pairs"] == 3 and row["rounds"] == 18, row["round_run_pairs"]


def test_sides_that_trained_different_kerases_stop_the_comparison(worker, tmp_path):
    """A pair that asks for one Keras on both sides: each run's record names the Keras rank 0's
    fit ran (bench/probe.py). The same Keras (Keras 3.15.1 on both): measured, each side's Keras
    in the row; Keras 3 against tf-keras: UnequalSettings naming both, and no run left."""
    started = []

    def start(cfg):
        run = start_worker(worker, tmp_path, 2000)
        record = tmp_path / f"{cfg['label']}-{time.monotonic_ns()}.rank0.json"
        record.write_text(json.dumps({"keras": cfg["keras"]}))
        run.record = str(record)
        started.append(run)
        return run

    same = dict(name="same",
                same_keras=True,
                a=dict(label="a", keras="Keras 3.15.1"),
                b=dict(label="b", keras="Keras 3.15.1"))
    row = measure(same, start, rounds=5, slice_seconds=0.1)
    assert row["error"] is None
    assert row["a_side"]["keras"] == row["b_side"]["keras"] == "Keras 3.15.1"
    unequal = dict(same,
                   name="unequal",
                   a=dict(label="tfdist", keras="Keras 3.15.1"),
                   b=dict(label="hand-written", keras="tf-keras 2.18.0"))
    with pytest.raises(compare.UnequalSettings) as raised:
        measure(unequal, start, rounds=5, slice_seconds=0.1)
    assert "tfdist Keras 3.15.1, hand-written tf-keras 2.18.0" in str(raised.value)
    for run in started:
        assert run.procs[0].poll() is not None
        assert not proctree.members(run.tags)


def test_extra_pairs_of_runs_only_while_the_deadline_allows(worker, tmp_path):
    """compare's deadline (make bench's minutes): a row that cannot tell gets another pair of runs
    only where it and the least seconds of every row after it end by then. A rule no interval
    meets (TELLS -1), so each row asks for all 3 pairs of runs: a deadline already past gives
    each its first only; one far off, all 3; one far off but taken by the rows after, the first
    only, while the last row, with nothing after it, gets all 3."""

    def start(cfg):
        return start_worker(worker, tmp_path, cfg["work"])

    def row(name):
        return dict(name=name,
                    a=dict(label="a", work=20000),
                    b=dict(label="b", work=20000),
                    run_pairs=1,
                    max_run_pairs=3)

    def pairs_run(deadline, least):
        rows = compare.compare([row("first"), row("last")],
                               rounds=2,
                               start=start,
                               slice_seconds=0.1,
                               warm_steps=3,
                               log=lambda line: None,
                               deadline=time.monotonic() + deadline,
                               least=least)
        return [r["run_pairs"] for r in rows]

    tells = compare.TELLS
    try:
        compare.TELLS = -1.0  # no interval is ever narrow enough (equal ratios give a width of 0)
        assert pairs_run(-1.0, lambda p: 0.0) == [1, 1]
        assert pairs_run(1e6, lambda p: 0.0) == [3, 3]
        assert pairs_run(1e6, lambda p: 2e6 if p["name"] == "last" else 0.0) == [1, 3]
    finally:
        compare.TELLS = tells
