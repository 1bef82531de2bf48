"""What many tests share: the tfdist command of the venv under test, a clean environment for the
processes they start, free ports, starting and waiting for commands, Horovod's skip mark,
capturing tfdist's log lines, and the check that a job left no process or listening port."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import math
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tfdist as _tfdist  # noqa: F401  (first: the tests run set up as a script that imports it)
from tfdist.cluster.ports import free_port_base  # noqa: F401  (re-exported for the tests)

from tests.cannot_run import unless

REPO = Path(__file__).resolve().parents[1]
PYTHON = str(Path(sys.prefix) / "bin" / "python")
TFDIST = str(Path(sys.prefix) / "bin" / "tfdist")

# setup.cfg's per-test timeout, and the longest single wait a test may make within it (a process, a
# job): the other 120 s are for its set-up, its other steps and its checks, so that the test's own
# wait ends first and fails with the process's output or the job's log, not pytest-timeout. A test
# that waits on several things in turn sets its limit from its waits with `timeout_for`.
TEST_TIMEOUT = 600
WAIT = 480


def timeout_for(*waits: float, rest: float = 120) -> pytest.MarkDecorator:
    """The pytest-timeout mark of a test whose own waits are `waits` (seconds, in turn), with
    `rest` for everything else; never below setup.cfg's."""
    return pytest.mark.timeout(max(TEST_TIMEOUT, sum(waits) + rest))


HOROVOD = importlib.util.find_spec("horovod") is not None
requires_horovod = unless(
    HOROVOD, "Horovod is not installed",
    "`make horovod` builds it (once, then cached) and installs it into .venv")

# Variables of the calling environment that would change a started task's cluster, roles or logs.
_CLUSTER_VARS = re.compile(
    r"^(SLURM_|SBATCH_|SRUN_|SALLOC_|HOROVOD_|TFDIST_|OMPI_|PMI|MV2_|FLUX_|JSM_|PALS_|PBS_|LSB_|"
    r"MPI_LOCAL|MPIR_CVAR_|HYDI_)|^TF_CONFIG$")


def clean_environ(**extra) -> dict[str, str]:
    """This process's environment less anything that would change a started task, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not _CLUSTER_VARS.match(k)}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def keras_environ(keras) -> dict[str, str]:
    """What a started process's environment adds for `keras`: tf-keras (2, "tf_keras") is
    TensorFlow's switch exported, as a user of tf-keras has it; Keras 3 (3, "keras3") is
    TensorFlow's default, the switch unset (as tests/conftest.py leaves it)."""
    if str(keras) in ("2", "tf_keras"):
        return {"TF_USE_LEGACY_KERAS": "1"}
    assert str(keras) in ("3", "keras3"), keras
    return {}


# The tf-keras case of a test whose Keras 3 case runs on every stack: on the default stack only.
# On the newest stack its TensorFlow side (the strategy, the collectives, Horovod's build) runs in
# the Keras 3 twin, and tf-keras's side did not change: tf-keras 2.21's engine/training.py,
# callbacks.py, optimizers, distribute/ and mixed_precision/, where tfdist hooks in, are 2.18's to
# the byte (diffed 2026-11-27; engine/data_adapter.py differs in None inputs, saving_lib in 14
# lines). tf-keras still trains on the newest stack: tests/test_keras_choice.py, the mid-epoch
# resume of tfdist train (tests/train/test_resume.py), Horovod's resume (test_user_script.py).
TF_KERAS_TWIN = pytest.mark.default_stack


def tf_keras_twin(*values, **kwargs):
    """pytest.param(*values) marked TF_KERAS_TWIN."""
    return pytest.param(*values, marks=[TF_KERAS_TWIN, *kwargs.pop("marks", [])], **kwargs)


# Set per test by tests/conftest.py; every process the test starts inherits it (clean_environ keeps
# it), so the job's processes are found by it wherever they were re-parented.
JOB_TAG = "TESTS_JOB_TAG"  # no TFDIST_ prefix: clean_environ keeps it


def job_processes() -> list[str]:
    """The processes (as "pid command line") that carry this test's JOB_TAG in their environment:
    everything the test started and their children, in any process group or session."""
    tag = f"{JOB_TAG}={os.environ[JOB_TAG]}".encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if tag not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{pid} {command}")
        except OSError:  # gone meanwhile, or a zombie
            continue
    return found


def listening(ports, netns: str | None = None) -> set[int]:
    """Which of `ports` have a TCP listener (IPv4 or IPv6) in this network namespace, or in the
    named one (`ip netns` name, e.g. a node of the Slurm test cluster)."""
    where = "/proc/net"
    if netns is not None:
        pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True,
                              text=True).stdout.split()
        if not pids:
            return set()
        where = f"/proc/{pids[0]}/net"
    found = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(where, table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":  # TCP_LISTEN
                found.add(int(fields[1].rsplit(":", 1)[1], 16))
    return found & set(ports)


def assert_nothing_left(ports=(), netns=(), timeout: float = 180) -> None:
    """Fail unless, within `timeout` s (an upper bound for a broken run, not a speed), no process
    this test started is left (see job_processes) and none of `ports` (those the job was given:
    task servers, the Horovod rendezvous) listens here or in the `netns` namespaces. Call it
    after a job ended, however it ended."""
    deadline = time.monotonic() + timeout
    while True:
        procs = job_processes()
        ports_left = listening(ports).union(*(listening(ports, ns) for ns in netns))
        if not procs and not ports_left:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"{timeout:g} s after the job ended, still there: processes {procs}, "
                        f"listening ports {sorted(ports_left)}")
        time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def run(cmd, timeout=WAIT, env=None, **kwargs) -> subprocess.CompletedProcess:
    """`cmd` in a clean environment (plus `env`), its output captured."""
    return subprocess.run([str(c) for c in cmd],
                          capture_output=True,
                          text=True,
                          timeout=timeout,
                          env=clean_environ(**(env or {})),
                          **kwargs)


def launch(n, *cmd, timeout=WAIT, **kwargs) -> subprocess.CompletedProcess:
    """`tfdist launch -n N -- CMD...`, as run() runs it."""
    return run([TFDIST, "launch", "-n", str(n), "--", *cmd], timeout=timeout, **kwargs)


def start(cmd, env=None, **kwargs) -> subprocess.Popen:
    """`cmd` started in a clean environment (plus `env`), stdout and stderr in one text pipe."""
    return subprocess.Popen([str(c) for c in cmd],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT,
                            text=True,
                            env=clean_environ(**(env or {})),
                            **kwargs)


def wait_for(proc: subprocess.Popen, marker: str, timeout: float = 300) -> str:
    """Read the output of `proc` until a line holds `marker`; returns what was read."""
    seen, deadline = [], time.monotonic() + timeout
    for line in proc.stdout:
        seen.append(line)
        if marker in line:
            return "".join(seen)
        assert time.monotonic() < deadline, "timed out waiting for " + marker
    raise AssertionError(f"process ended before {marker!r}:\n" + "".join(seen)[-3000:])


def finish(proc: subprocess.Popen, timeout: float = WAIT) -> tuple[int, str]:
    """(exit status, the rest of its output); kills it and fails after `timeout` s."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"still running after {timeout} s (hang):\n{out[-3000:]}")
    return proc.returncode, out


@contextlib.contextmanager
def tfdist_log(caplog):
    """caplog.records also gets tfdist's log (its logger does not propagate to the root)."""
    logger = logging.getLogger("tfdist")
    level = logger.level
    logger.addHandler(caplog.handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield caplog
    finally:
        logger.removeHandler(caplog.handler)
        logger.setLevel(level)


def assert_one_skipped_step(result: dict, overflow_step: int, steps: int) -> None:
    """A mixed_float16 run whose gradients overflowed (on one replica) in step `overflow_step`:
    Keras's loss scale (initially 2**15) halved once, at that step, whose update was skipped; every
    other step updated the weights, which stayed finite. `result`: the scale and a kernel after
    each step ("scales", "kernels") and the final "weights"."""
    import numpy as np

    scale = 2.0**15
    assert result["scales"] == [scale] * overflow_step + [scale / 2] * (steps - overflow_step)
    kernels = [np.array(k) for k in result["kernels"]]
    for step in range(1, steps):
        same = np.array_equal(kernels[step], kernels[step - 1])
        assert same == (step == overflow_step), step
    assert all(np.isfinite(np.array(w)).all() for w in result["weights"])


DIGITS_TEST = 360  # the test split of `--pipeline=digits` (pipelines/digits.py NUM_TEST)


def reached(accuracy: float, share: float, n: int = DIGITS_TEST) -> bool:
    """Whether a test accuracy over `n` samples got at least `share` of them right. Keras reports
    accuracy in float32, where 324/360 reads 0.89999998 (below 0.9) and 342/360 0.94999999: the
    counts are compared, not the floats."""
    return round(accuracy * n) >= math.ceil(share * n - 1e-9)


def saved_model(model_dir, keras):
    """MODEL_DIR/model.keras loaded in this process by the Keras that saved it (2: tf-keras, 3:
    Keras 3), as a user would load it."""
    import tfdist  # noqa: F401  (before TensorFlow, as in a user's script)
    from tfdist.keras_compat import keras_module

    return keras_module(int(keras)).models.load_model(os.path.join(model_dir, "model.keras"))
