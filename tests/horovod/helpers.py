"""Helpers of the Horovod tests: start tasks as `tfdist launch` does."""

import os
import subprocess
import sys
import time

import pytest

from tests.helpers import clean_environ, keras_environ
from tfdist.cluster.local import launch_environ

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "hvd_worker.py")


def start_task(mode, out, rank=None, world=2, port=None, prefix=(), worker=WORKER, **extra):
    """One worker process (`worker`, a script of this folder, run after `prefix`); with `rank`,
    the environment `tfdist launch` gives that rank. hvd_worker.py's model is tf_keras: its
    environment has tf-keras's switch, as its user exports it."""
    env = clean_environ(TF_CPP_MIN_LOG_LEVEL="2",
                        PYTHONUNBUFFERED="1",
                        CUDA_VISIBLE_DEVICES="",
                        **(keras_environ(2) if worker == WORKER else {}),
                        **extra)
    if rank is not None:
        env.update(launch_environ(rank, world, port))
    return subprocess.Popen([*prefix, sys.executable,
                             os.path.join(HERE, worker), mode,
                             str(out)],
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
