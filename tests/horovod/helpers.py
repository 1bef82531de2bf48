"""Helpers of the Horovod tests: skip without Horovod, start tasks as `tfdist launch` does."""

import importlib.util
import os
import random
import socket
import subprocess
import sys
import time

import pytest

from tfdist.cluster.local import launch_environ

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "hvd_worker.py")
HOROVOD = importlib.util.find_spec("horovod") is not None
SKIP_REASON = (
    "Horovod is not installed: `make horovod` builds it (once, then cached) and installs "
    "it into .venv")

requires_horovod = pytest.mark.skipif(not HOROVOD, reason=SKIP_REASON)


def free_port_base(width=2):
    """A base port with `width` free ports above it, in tfdist's range 20000..32000."""
    for _ in range(200):
        base = random.randrange(20000, 32000 - width)
        ok = True
        for port in range(base, base + width):
            with socket.socket() as s:
                try:
                    s.bind(("0.0.0.0", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port found")


def clean_environ(**extra):
    """This process's environment less anything that would change a task's cluster or Horovod."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURM_", "HOROVOD_", "TFDIST_", "OMPI_", "PMI")) and k != "TF_CONFIG"
    }
    env.update(TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="")
    env.update(extra)
    return env


def start_task(mode, out, rank=None, world=2, port=None, prefix=(), **extra):
    """One worker process (its command after `prefix`); with `rank`, the environment
    `tfdist launch` gives that rank."""
    env = clean_environ(**extra)
    if rank is not None:
        env.update(launch_environ(rank, world, port))
    return subprocess.Popen(
        [*prefix, sys.executable, WORKER, mode, str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True)


def finish(procs, timeout):
    """Wait for every process (killing all after `timeout` s); returns [(code, output, seconds)]."""
    start = time.monotonic()
    results = []
    for p in procs:
        left = max(1.0, timeout - (time.monotonic() - start))
        try:
            out, _ = p.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            pytest.fail(f"a task still ran after {timeout} s (hang):\n{out[-3000:]}")
        results.append((p.returncode, out, time.monotonic() - start))
    return results
