"""An ended benchmark leaves nothing: SIGTERM to a bench driver while its measured runs train (and
one side is stopped between its slices) ends every process they started, in every process group,
as `tfdist launch` ends its ranks (bench/common.py's end_children_on_signals, bench/proctree.py's
end: SIGCONT, SIGTERM, SIGKILL after the grace, to every process carrying a run's tag)."""

import os
import signal
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, PYTHON, assert_nothing_left, job_processes, start, timeout_for

BENCH = REPO / "bench"

# A measured run's root: counts its steps as bench/probe.py does, and starts a child in a session
# of its own that ignores SIGTERM (as a launcher's rank in its own group, one that would not stop).
WORKER = textwrap.dedent("""
    import mmap, os, signal, struct, subprocess, sys, time
    subprocess.Popen([sys.executable, "-c",
                      "import signal, time\\n"
                      "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
                      "time.sleep(600)"], start_new_session=True)
    with open(os.environ["BENCH_STEPS_FILE"], "r+b") as f:
        counter = mmap.mmap(f.fileno(), 8)
    steps = 0
    while True:
        x = sum(i * i for i in range(20000))
        steps += 1
        struct.pack_into("<q", counter, 0, steps)
""")

# The bench's driver on an endless comparison of two such runs (bench/compare.py).
DRIVER = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, sys.argv[1])
    import common, compare
    worker, work, grace = sys.argv[2], sys.argv[3], float(sys.argv[4])
    common.end_children_on_signals(grace=grace)

    def start(cfg):
        steps = compare.steps_file(os.path.join(work, f"steps-{time.monotonic_ns()}"))
        log = os.path.join(work, "worker.log")
        proc = common.start([sys.executable, worker], dict(os.environ, BENCH_STEPS_FILE=steps), log)
        return compare.Run([proc], steps, 1, log)

    pair = dict(name="endless", a=dict(label="a"), b=dict(label="b"))
    compare.compare([pair], rounds=10**6, start=start, slice_seconds=0.3, warm_steps=3)
""")


def stopped(pids) -> list[int]:
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rindex(b")") + 2:].split()[0] in (b"T", b"t"):
            out.append(pid)
    return out


def wait_until(condition, what: str, timeout: float):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {job_processes()}"
        time.sleep(0.05)


def tagged(marker: str) -> list[int]:
    return [int(p.split()[0]) for p in job_processes() if marker in p]


def end_and_check(driver, grace: float) -> str:
    driver.send_signal(signal.SIGTERM)
    out, _ = driver.communicate(timeout=grace + 120)
    assert driver.returncode == 128 + signal.SIGTERM, out[-3000:]
    assert "SIGTERM: ending the processes it started" in out
    assert_nothing_left(timeout=30)
    return out


@pytest.mark.default_stack
def test_an_ended_driver_ends_its_runs_in_every_group(tmp_path):
    """No TensorFlow, no Keras: the driver's own code on runs of plain Python processes."""
    worker, driver = tmp_path / "worker.py", tmp_path / "driver.py"
    worker.write_text(WORKER)
    driver.write_text(DRIVER)
    proc = start([PYTHON, driver, BENCH, worker, tmp_path, "2"])
    # Both runs up, each with its child, and one stopped between its slices.
    wait_until(lambda: len(tagged("time.sleep(600)")) == 2 and stopped(tagged(str(worker))),
               "two runs, one stopped",
               timeout=120)
    end_and_check(proc, grace=2)


@pytest.mark.slow
@pytest.mark.default_stack  # the bench's own process handling: one stack is enough
@timeout_for(300, 120)
def test_an_ended_training_bench_leaves_no_process(tmp_path):
    """bench/training.py itself on one tf-keras row (multi_worker/cnn/tf-keras: tfdist launch with
    its guards and ranks against the hand-written pair), ended after its runs warmed up and one
    was stopped."""
    proc = start([
        PYTHON, BENCH / "training.py", "--only=multi_worker/cnn/tf-keras", "--quick",
        "--steps_per_epoch=20", "--timeout=240"
    ],
                 env={"PATH": f"{Path(PYTHON).parent}{os.pathsep}{os.environ['PATH']}"})
    wait_until(lambda: stopped(tagged("probe.py")), "a measured run stopped", timeout=300)
    end_and_check(proc, grace=10)
