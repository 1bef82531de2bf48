"""What many tests share: the tfdist command of the venv under test, a clean environment for the
processes they start, free ports, starting and waiting for commands, Horovod's skip mark and
capturing tfdist's log lines."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfdist.cluster.ports import free_port_base  # noqa: F401  (re-exported for the tests)

REPO = Path(__file__).resolve().parents[1]
PYTHON = str(Path(sys.prefix) / "bin" / "python")
TFDIST = str(Path(sys.prefix) / "bin" / "tfdist")

HOROVOD = importlib.util.find_spec("horovod") is not None
requires_horovod = pytest.mark.skipif(
    not HOROVOD,
    reason="Horovod is not installed: `make horovod` builds it (once, then cached) and installs "
    "it into .venv")

# Variables of the calling environment that would change a started task's cluster, roles or logs.
_CLUSTER_VARS = re.compile(
    r"^(SLURM_|SBATCH_|SRUN_|SALLOC_|HOROVOD_|TFDIST_|OMPI_|PMI)|^TF_CONFIG$")


def clean_environ(**extra) -> dict[str, str]:
    """This process's environment less anything that would change a started task, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not _CLUSTER_VARS.match(k)}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def run(cmd, timeout=600, env=None, **kwargs) -> subprocess.CompletedProcess:
    """`cmd` in a clean environment (plus `env`), its output captured."""
    return subprocess.run([str(c) for c in cmd],
                          capture_output=True,
                          text=True,
                          timeout=timeout,
                          env=clean_environ(**(env or {})),
                          **kwargs)


def launch(n, *cmd, timeout=600, **kwargs) -> subprocess.CompletedProcess:
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


def finish(proc: subprocess.Popen, timeout: float = 600) -> tuple[int, str]:
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
