"""A job that stops making progress ends within the watchdog's T (set small here: the only place a
time is the thing tested) plus a generous margin, non-zero (124), with the chief's one-line summary
naming the right rank and every responsive rank's stacks in the log. Real processes: a worker
frozen with SIGSTOP (multi_worker, horovod), a user's pipeline that blocks on one rank, all
workers of a parameter-server job killed. `tfdist train` with flags, and (horovod) a user's own
model.fit with rt.callbacks() set by the environment.

The hangs are events the test makes (SIGSTOP, a trigger file, SIGKILL) once the ranks' progress
records (MODEL_DIR/progress, the watchdog's side channel) show steps done. `tfdist train` runs
have one epoch of steps no machine finishes, so no epoch end falls into the hang; the user's
script has epochs of 50 steps, as users write them, and its rank is stopped inside one (at an
epoch's end the watchdog's longer grace for slow phases would apply). In the SIGSTOP runs the
watchdog's own deadline is what ends the job (its "stalled" line, status 124): the strategies'
own checks of their peers are kept later (Horovod's gloo timeout raised; multi_worker's T below
TensorFlow's heartbeat).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import PYTHON, TFDIST, clean_environ, free_port_base, requires_horovod
from tfdist.cluster.local import launch_environ

# The watchdog is tfdist's own thread and files: the default stack only in CI. Its deadlines are
# the thing tested: no other test beside them (tools/run_tests.py).
pytestmark = [pytest.mark.slow, pytest.mark.default_stack, pytest.mark.alone]

HERE = Path(__file__).parent
T = 20  # --watchdog_timeout of these runs
MARGIN = 150  # seconds after T: reporting window, launch's grace, a loaded machine
ENDLESS = ["--epochs=1", "--steps_per_epoch=1000000", "--notensorboard", f"--watchdog_timeout={T}"]
# multi_worker's own check of its peers (TensorFlow's heartbeat: UnavailableError about 10 s after
# a peer stops) ended the SIGSTOP run before a watchdog of T = 20 s did (37 s after the stop,
# 2026-11-26): there the watchdog's T is below it, so that its deadline is what ends the run.
T_BELOW_PEER_CHECK = 4


def record(model_dir: Path, rank: int) -> dict:
    try:
        return json.loads((model_dir / "progress" / f"rank-{rank}.json").read_text())
    except (OSError, ValueError):
        return {}


def wait_for_steps(procs, model_dir: Path, ranks, steps: int = 10, timeout: float = 400) -> dict:
    """Until every rank in `ranks` has published `steps` completed steps; their records."""
    deadline = time.monotonic() + timeout
    while True:
        records = {r: record(model_dir, r) for r in ranks}
        if all(rec.get("step", 0) >= steps for rec in records.values()):
            return records
        assert all(p.poll() is None for p in procs), "a process ended before training"
        assert time.monotonic() < deadline, f"no {steps} steps within {timeout} s: {records}"
        time.sleep(0.5)


def launch(tmp_path: Path, n: int, *args, command=(TFDIST, "train"), **env) -> subprocess.Popen:
    log = open(tmp_path / "launch.log", "w")
    return subprocess.Popen([TFDIST, "launch", "-n",
                             str(n), "--grace=10", "--", *command, *args],
                            stdout=log,
                            stderr=subprocess.STDOUT,
                            env=clean_environ(PYTHONUNBUFFERED="1", **env),
                            start_new_session=True)


def ends_within(proc: subprocess.Popen, hung: float, t: float = T) -> tuple[int, float]:
    """(status, seconds from the hang to the end); fails after t + MARGIN."""
    try:
        status = proc.wait(timeout=t + MARGIN - (time.monotonic() - hung))
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {t + MARGIN} s after the hang (watchdog T={t} s)")
    return status, time.monotonic() - hung


def kill_group(proc: subprocess.Popen) -> None:
    """The process and everything it started (its own session)."""
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
    proc.wait()


def summary_line(out: str) -> str:
    # stalled: the watchdog; Lost / Horovod shut down: the strategy's own check of its peers.
    m = re.search(
        r"^\[0\] tfdist: error: (stalled: |Lost |Horovod shut down while ).* "
        r"Stopped progressing: .*$", out, re.M)
    assert m, out[-4000:]
    return m.group(0)


def mid_epoch(records: dict, rank: int, steps_per_epoch: int) -> bool:
    """Whether `rank`'s last published step is well inside an epoch: a stop there meets the
    watchdog's T, not the longer grace of an epoch's end (SLOW_FLOOR)."""
    return 5 <= records[rank].get("step", 0) % steps_per_epoch <= steps_per_epoch - 15


def stopped_worker(strategy, tmp_path, own_script=False, t=T):
    """Rank 1 stopped by SIGSTOP: the watchdog's deadline (t) ends the job, status 124. The
    strategy's own check of its peers is kept out of the way: Horovod's gloo timeout set past
    the test's end, multi_worker's heartbeat (about 10 s) above t."""
    model_dir = tmp_path / "run"
    if own_script:
        # A user's model.fit with rt.callbacks() and no model_dir: T and the side channel's
        # directory from the environment.
        proc = launch(tmp_path,
                      2,
                      strategy,
                      command=(PYTHON, HERE / "long_train_script.py"),
                      TFDIST_WATCHDOG_TIMEOUT=t,
                      TFDIST_PROGRESS_DIR=model_dir / "progress",
                      HOROVOD_GLOO_TIMEOUT_SECONDS=t + MARGIN + 60)
    else:
        proc = launch(tmp_path, 2, f"--strategy={strategy}", f"--model_dir={model_dir}",
                      *ENDLESS[:-1], f"--watchdog_timeout={t}")
    try:
        records = wait_for_steps([proc], model_dir, [0, 1])
        # The user's script has epochs of 50 steps (long_train_script.py): stop rank 1 inside one.
        deadline = time.monotonic() + 60
        while own_script and not mid_epoch(records, 1, 50):
            assert time.monotonic() < deadline, records
            records = {r: record(model_dir, r) for r in (0, 1)}
        os.kill(records[1]["pid"], signal.SIGSTOP)
        status, seconds = ends_within(proc, time.monotonic(), t)
    finally:
        kill_group(proc)
    out = (tmp_path / "launch.log").read_text()
    line = summary_line(out)
    print(f"{strategy}, rank 1 stopped: the job ended {seconds:.0f} s later: {line}")
    # The watchdog's own deadline and exit status, not the strategy's check of its peers.
    assert line.startswith("[0] tfdist: error: stalled: no training step for "), line
    assert re.search(rf"\(limit {t} s\)", line), line
    assert status == 124, out[-4000:]
    assert re.search(
        r"Stopped progressing: rank 1 on localhost \(pid \d+\) last seen at step \d+: no "
        r"heartbeat \(frozen, stopped, or its node failed\)", line), line
    assert "[0] tfdist: rank 0: Thread MainThread (most recent call last):" in out
    # A stopped process dumps nothing: the hang report holds rank 0's stacks only. tfdist launch
    # then continues rank 1 to end it (SIGCONT before SIGTERM, so that it ends within the grace);
    # what rank 1 prints then comes after launch's "stopping" line.
    report, stopping, _ = out.partition("; stopping the other 1 process(es).")
    assert stopping, out[-3000:]
    assert "[1] tfdist: rank 1: Thread" not in report


def test_multi_worker_rank_stopped_is_named(tmp_path):
    stopped_worker("multi_worker", tmp_path, t=T_BELOW_PEER_CHECK)


@requires_horovod
def test_horovod_rank_stopped_in_a_users_script_is_named(tmp_path):
    stopped_worker("horovod", tmp_path, own_script=True)


def test_a_pipeline_blocked_on_one_rank_is_named(tmp_path):
    model_dir, trigger = tmp_path / "run", tmp_path / "hang-now"
    proc = launch(tmp_path, 2, "--strategy=multi_worker", f"--model_dir={model_dir}",
                  f"--pipeline={HERE / 'blocking_pipeline.py'}",
                  f"--pipeline_option=trigger={trigger}", "--pipeline_option=block_pipeline=1",
                  *ENDLESS)
    try:
        wait_for_steps([proc], model_dir, [0, 1])
        trigger.touch()  # rank 1's next batch blocks (after the ones it has prefetched)
        status, seconds = ends_within(proc, time.monotonic())
    finally:
        kill_group(proc)
    out = (tmp_path / "launch.log").read_text()
    line = summary_line(out)
    print(f"pipeline blocked on rank 1: the job ended {seconds:.0f} s later: {line}")
    assert status == 124, out[-4000:]
    assert re.search(
        r"Stopped progressing: rank 1 on localhost \(pid \d+\) at step (\d+): "
        r"waiting for its input pipeline \(\d+ batches delivered, the others \d+\)\. "
        r"Waiting: rank 0 at step \1\.", line), line
    # Both ranks run Python: both dump, and rank 1's stacks show the user's hung read.
    assert "[0] tfdist: rank 0: Thread MainThread (most recent call last):" in out
    assert re.search(r"\[1\] tfdist: rank 1: +File \".*blocking_pipeline\.py\", line \d+, in read",
                     out), out[-4000:]


def test_parameter_server_chief_without_workers_ends(tmp_path):
    # rank 0 chief, rank 1 ps, ranks 2 and 3 workers, each started alone so that killing one
    # leaves the others running (as on separate nodes).
    model_dir, n = tmp_path / "run", 4
    port = free_port_base(n)
    procs = []
    for rank in range(n):
        log = open(tmp_path / f"rank{rank}.log", "w")
        procs.append(
            subprocess.Popen([
                TFDIST, "train", "--strategy=parameter_server", "--optimizer=adam",
                f"--model_dir={model_dir}", *ENDLESS
            ],
                             env=clean_environ(PYTHONUNBUFFERED="1",
                                               **launch_environ(rank, n, port, "parameter_server")),
                             stdout=log,
                             stderr=subprocess.STDOUT,
                             start_new_session=True))
    try:
        wait_for_steps(procs, model_dir, [0])
        for p in procs[2:]:
            os.killpg(p.pid, signal.SIGKILL)
        status, seconds = ends_within(procs[0], time.monotonic())
    finally:
        for p in procs:
            kill_group(p)
    out = (tmp_path / "rank0.log").read_text()
    m = re.search(r"^tfdist: error: stalled: .*$", out, re.M)
    assert m, out[-4000:]
    print(f"parameter_server, both workers killed: the chief ended {seconds:.0f} s later: "
          f"{m.group(0)}")
    assert status == 124, out[-4000:]
    assert re.search(
        r"Stopped progressing: worker 0 \(rank 2, localhost:\d+\), worker 1 \(rank 3, "
        r"localhost:\d+\): gone \(connection refused\)\. Waiting: "
        r"rank 0 at step \d+\.", m.group(0)), m.group(0)
    assert "tfdist: rank 0: Thread MainThread (most recent call last):" in out
