"""The progress watchdog without TensorFlow: its settings, its limits, the summary it writes from
the ranks' records, and the requeue budget after a hang. Real threads and files; the watchdog's
own T is the thing tested here, so it is set small (1 s)."""

from __future__ import annotations

import json
import os
import re
import threading
from unittest import mock

import pytest

from tfdist.errors import ConfigError
from tfdist.train import restarts
from tfdist.train.progress_board import ProgressBoard
from tfdist.train.watchdog import (AUTO_FLOOR, EXIT_STALLED, SLOW_FLOOR, Watchdog, timeout_setting)


@pytest.mark.parametrize("value, env, expected", [
    (None, None, None),
    (None, "auto", None),
    (None, "45", 45.0),
    (None, "off", 0.0),
    ("0", "45", 0.0),
    ("20", None, 20.0),
    (7.5, None, 7.5),
])
def test_timeout_setting(value, env, expected):
    environ = {} if env is None else {"TFDIST_WATCHDOG_TIMEOUT": env}
    assert timeout_setting(value, environ) == expected


@pytest.mark.parametrize("value, env, named", [("-3", None, "watchdog_timeout='-3'"),
                                               (None, "soon", "TFDIST_WATCHDOG_TIMEOUT='soon'")])
def test_a_bad_timeout_is_named(value, env, named):
    environ = {} if env is None else {"TFDIST_WATCHDOG_TIMEOUT": env}
    with pytest.raises(ConfigError, match=rf"{named}.*: expected seconds .*'auto'.*0/'off'"):
        timeout_setting(value, environ)


def test_limits_auto_and_slow_phases():
    w = Watchdog(0, None)
    assert w.limit() == max(SLOW_FLOOR, 3 * AUTO_FLOOR)  # before the first step
    w.step_completed()
    assert w.limit() == AUTO_FLOOR
    w._slowest = 30.0  # 50 steps of 30 s
    assert w.limit() == 1500.0
    w.slow_phase()
    assert w.limit() == 4500.0
    fixed = Watchdog(0, 20.0)
    fixed.step_completed()
    assert fixed.limit() == 20.0
    fixed.slow_phase()
    assert fixed.limit() == SLOW_FLOOR


def test_polled_steps_add_up_over_fits():
    """parameter_server: each fit's step counter starts at 0 (tf-keras's _train_counter, tfdist's
    for Keras 3); the watchdog's count goes on from where the last fit left it."""
    w = Watchdog(0, 20.0)
    counter = [0]
    w.poll_steps(lambda: counter[0])
    w.read_steps(5.0)
    assert (w.steps, w.limit()) == (0, SLOW_FLOOR)  # nothing done yet
    counter[0] = 7
    w.read_steps(5.0)
    assert (w.steps, w.limit()) == (7, 20.0)  # steps done: progress
    w.poll_steps(lambda: counter[0])  # the next fit
    counter[0] = 0
    w.read_steps(5.0)
    assert w.steps == 7
    counter[0] = 3
    w.read_steps(5.0)
    assert w.steps == 10
    w.poll_steps(None)  # fed by the hooks again
    w.read_steps(5.0)
    w.step_completed()
    assert w.steps == 11


def test_a_local_counter_is_read_at_a_slow_phase():
    """tf-keras: the steps done before a slow phase (an epoch's end, a checkpoint write) are
    counted when it begins, so the next poll does not take them for progress in it and cut its
    grace to T; steps after it end it."""
    w = Watchdog(0, 20.0)
    counter = [0]
    w.poll_steps(lambda: counter[0], local=True)
    counter[0] = 5  # steps done since the last poll
    w.slow_phase()
    assert (w.steps, w.limit()) == (5, SLOW_FLOOR)
    w.read_steps(5.0)  # the next poll: no new step
    assert (w.steps, w.limit()) == (5, SLOW_FLOOR)
    counter[0] = 6
    w.read_steps(5.0)
    assert (w.steps, w.limit()) == (6, 20.0)


def read_now(w):
    """The watchdog's activity read, as its thread makes it each interval: the first poll starts
    a read, the next takes its result (and starts another)."""
    w.read_activity()
    _wait_for(lambda: not w._activity._busy)
    w.read_activity()
    _wait_for(lambda: not w._activity._busy)


def _wait_for(done):
    event = threading.Event()
    while not done():
        event.wait(0.01)
    return True


def test_batches_taken_inside_a_call_are_progress():
    """Keras 3 feeds the watchdog once a call (steps_per_execution): batches the steps take count
    as progress in between, so a long call is no stall and a hang inside the first call after a
    slow phase is timed against T, not the slow phase's grace."""
    w = Watchdog(0, 20.0)
    batches, samples = [0], [None]  # the meter's counter appears with fit's first step function
    w.watch_activity(lambda: (batches[0], samples[0]))
    w.start()
    w.stop()  # the thread is not needed: reads are driven here
    assert w.limit() == SLOW_FLOOR
    read_now(w)
    assert w.limit() == SLOW_FLOOR  # nothing taken yet
    samples[0] = 0.0
    read_now(w)
    assert w.limit() == SLOW_FLOOR  # a counter that appears is no progress
    samples[0] = 32.0
    read_now(w)
    assert w.limit() == 20.0  # a batch taken inside the first call
    batches[0], samples[0] = 4, 128.0  # the epoch ends...
    w.slow_phase()  # ...its batches are read when the phase begins, not taken for progress in it
    read_now(w)
    assert w.limit() == SLOW_FLOOR
    batches[0] = 5  # the next epoch's first batch (rt.dataset's counter)
    read_now(w)
    assert w.limit() == 20.0
    w.slow_phase()
    samples[0] = 0.0  # a new fit's counter starts from 0: no progress...
    read_now(w)
    assert w.limit() == SLOW_FLOOR
    samples[0] = 32.0  # ...until it rises
    read_now(w)
    assert w.limit() == 20.0


def test_a_read_begun_before_a_slow_phase_is_not_progress_in_it():
    w = Watchdog(0, 20.0)
    batches, release = [0], threading.Event()

    def slow_source():
        value = batches[0]
        release.wait(10)
        return (value, )

    w.watch_activity(lambda: (batches[0], ))
    w.read_activity()  # baseline read
    _wait_for(lambda: not w._activity._busy)
    w.read_activity()
    _wait_for(lambda: not w._activity._busy)
    w._activity.source = slow_source
    batches[0] = 3
    w.read_activity()  # a read of 3 begins and takes its time...
    w._activity.source = lambda: (batches[0], )
    batches[0] = 5
    w.slow_phase()  # ...the phase begins at 5
    release.set()
    _wait_for(lambda: not w._activity._busy)
    w.read_activity()  # the read of 3 is dropped: taken, the next read of 5 would be progress
    read_now(w)
    assert w.limit() == SLOW_FLOOR
    batches[0] = 6
    read_now(w)
    assert w.limit() == 20.0


def test_a_read_that_hangs_delays_nothing():
    w = Watchdog(0, 20.0)
    never, reads = threading.Event(), []

    def hanging():
        reads.append(1)
        never.wait(60)
        return ()

    w.watch_activity(hanging)
    for _ in range(3):
        w.read_activity()  # returns at once; one read at a time
    _wait_for(lambda: reads)
    assert len(reads) == 1 and w._activity._busy
    never.set()


# The tests of stall(): a watchdog thread against its 1 s deadline, whose summary depends on the
# pace of the threads beside it (a loaded machine made one flaky): tools/run_tests.py runs them
# in the alone part, with no other test beside them.
paced = pytest.mark.alone


def stall(tmp_path, others=(), input_batches=None, ranks=(0, 1)):
    """Rank 0's watchdog with T=1 s after 3 steps, beside `others` (rank, record) written once;
    (exit status, summary) once it has ended."""
    board = ProgressBoard(str(tmp_path), 0, run="r")
    for rank, rec in others:
        ProgressBoard(str(tmp_path), rank, run="r").publish(rec)
    ended, said = threading.Event(), []
    codes = []

    def exit(code):
        codes.append(code)
        ended.set()

    w = Watchdog(0,
                 1.0,
                 board,
                 ranks=list(ranks),
                 input_batches=input_batches,
                 report=lambda summary: said.append(summary) or "Not requeued.",
                 host="node1",
                 exit=exit,
                 count_timeout=3.0)  # the counters here answer at once (3 s: a loaded machine)
    w.start()
    for _ in range(3):
        w.step_completed()
    assert ended.wait(60), "the watchdog never ended the run"
    w.stop()
    return codes[0], said[0]


@paced
def test_a_frozen_rank_is_named(tmp_path):
    frozen = dict(state="running", beat=7, step=2, host="node2", pid=99)
    status, line = stall(tmp_path, [(1, frozen)])
    assert status == EXIT_STALLED
    # The seconds without a step are at least the limit; more when the machine is loaded (2 s seen).
    assert re.match(
        r"stalled: no training step for [1-9]\d* s \(limit 1 s\)\. Stopped progressing: "
        r"rank 1 on node2 \(pid 99\) last seen at step 2: no heartbeat \(frozen, "
        r"stopped, or its node failed\)\. Waiting: rank 0 at step 3\.", line), line


@paced
def test_a_rank_that_never_published_is_named(tmp_path):
    status, line = stall(tmp_path)
    assert "Stopped progressing: rank 1 (never published its progress): no heartbeat" in line


@paced
def test_a_rank_waiting_for_input_is_named(tmp_path):
    starving = dict(state="stalled", beat=3, step=3, host="node2", pid=98, input_batches=3)
    status, line = stall(tmp_path, [(1, starving)], input_batches=lambda: 5)
    assert ("Stopped progressing: rank 1 on node2 (pid 98) at step 3: waiting for its input "
            "pipeline (3 batches delivered, the others 5). Waiting: rank 0 at step 3.") in line


@paced
def test_none_stands_out(tmp_path):
    alike = dict(state="stalled", beat=3, step=3, host="node2", pid=98, input_batches=5)
    status, line = stall(tmp_path, [(1, alike)], input_batches=lambda: 5)
    assert "Stopped progressing: rank 0 at step 3, rank 1 at step 3, none stands out" in line


def test_an_earlier_runs_record_is_not_read(tmp_path):
    ProgressBoard(str(tmp_path), 1, run="earlier").publish(dict(state="running", beat=1, step=9))
    assert ProgressBoard(str(tmp_path), 0, run="now").read(1) is None


FAKE_SCONTROL = """#!/bin/sh
echo "$*" >> "$FAKE_SCONTROL_LOG"
"""


@pytest.fixture
def slurm_job(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(FAKE_SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    calls = tmp_path / "calls"
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_SCONTROL_LOG": str(calls),
        "SLURM_JOB_ID": "77",
        "TFDIST_REQUEUE": "1"
    }
    with mock.patch.dict(os.environ, env):
        yield calls


def test_requeued_at_most_max_restarts_then_a_plain_failure(tmp_path, slurm_job):
    progress = str(tmp_path / "progress")
    told = []
    for restart in range(3):
        with mock.patch.dict(os.environ, {"SLURM_RESTART_COUNT": str(restart)}):
            told.append(restarts.end_after_failure(progress, f"hang {restart}"))
    assert told[0] == ("Requeued the job (restart 1 of at most 2, TFDIST_MAX_RESTARTS); it "
                       "resumes from the last checkpoint.")
    assert told[1].startswith("Requeued the job (restart 2 of at most 2")
    assert told[2] == ("Not requeued: this job was already requeued 2 time(s) after a hang or a "
                       "lost task (TFDIST_MAX_RESTARTS=2). Each time: run 1 "
                       "(SLURM_RESTART_COUNT=0): hang 0; run 2 (SLURM_RESTART_COUNT=1): hang 1; "
                       "now run 3: hang 2. Find the cause in the stacks above before "
                       "resubmitting.")
    # Each time: is the job cancelled (scancel: never requeue)? then requeue.
    assert slurm_job.read_text().splitlines() == ["show job -o 77", "requeue 77"] * 2
    history = [json.loads(line) for line in open(os.path.join(progress, "restarts.jsonl"))]
    assert [(h["restart"], h["requeued"]) for h in history] == [(0, True), (1, True), (2, False)]


def test_another_jobs_restarts_do_not_count(tmp_path, slurm_job):
    progress = str(tmp_path / "progress")
    for _ in range(2):
        with mock.patch.dict(os.environ, {"SLURM_JOB_ID": "76"}):
            restarts.end_after_failure(progress, "an earlier job's hang")
    assert restarts.end_after_failure(progress, "hang").startswith("Requeued the job (restart 1")


def test_requeue_off_says_how_to_turn_it_on(tmp_path, slurm_job):
    with mock.patch.dict(os.environ, {"TFDIST_REQUEUE": "0"}):
        told = restarts.end_after_failure(str(tmp_path), "hang")
    assert told.startswith("Not requeued (requeue is off: TFDIST_REQUEUE=1")
    assert not slurm_job.exists()


@pytest.mark.parametrize("value", ["-1", "two"])
def test_a_bad_max_restarts_is_named(value):
    with pytest.raises(ConfigError, match=f"TFDIST_MAX_RESTARTS='{value}': expected a whole"):
        restarts.max_restarts({"TFDIST_MAX_RESTARTS": value})
