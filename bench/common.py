"""What the benchmarks share: the machine record, summary statistics, the JSON writer and a
subprocess runner that never leaves a process behind: not at a timeout, and not when the driver
itself is ended (SIGTERM, SIGINT: `end_children_on_signals`).

Imports no TensorFlow: the drivers stay light, the measured processes load it themselves.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from importlib import metadata
from typing import Optional, Sequence

import proctree
from tfdist.files import write_json

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
RESULTS = os.path.join(BENCH, "results")
BIN = os.path.dirname(sys.executable)  # the venv's bin: python, tfdist, horovodrun
# Seconds an ended driver's processes get between SIGTERM and SIGKILL (tfdist launch passes the
# signal on to its ranks, which stop at their next step).
GRACE = 10.0
_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_started: list[subprocess.Popen] = []  # every process this driver started whose run lives


def machine() -> dict:
    """Cores, memory, CPU model, load and the versions of the stack being measured."""

    def version(name: str) -> Optional[str]:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    cpu = None
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip()
                        for line in f if line.startswith("model name")), None)
    except OSError:
        pass
    memory_gb = None
    try:
        with open("/proc/meminfo") as f:
            kb = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
            memory_gb = round(kb / 2**20, 1)
    except (OSError, StopIteration, ValueError):
        pass
    return {
        "cores": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "memory_gb": memory_gb,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "tensorflow": version("tensorflow"),
        "tf_keras": version("tf-keras"),
        "horovod": version("horovod"),
        "tfdist": version("tfdist"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }


def summary(samples: Sequence[float], digits: int = 4) -> dict:
    """Median, min, max and relative spread ((max - min) / median) of the raw samples."""
    values = [float(x) for x in samples if x is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "spread": None, "n": 0}
    med = statistics.median(values)
    return {
        "median": round(med, digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "spread": round((max(values) - min(values)) / med, 3) if med else None,
        "n": len(values),
    }


def ratio(a: Optional[float], b: Optional[float], digits: int = 3) -> Optional[float]:
    if a is None or not b:
        return None
    return round(a / b, digits)


def load_result(name: str) -> Optional[dict]:
    """bench/results/<name>.json as last written, or None."""
    path = os.path.join(RESULTS, f"{name}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def write_result(name: str, result: dict) -> str:
    """bench/results/NAME.json, written atomically; returns its path."""
    path = os.path.join(RESULTS, f"{name}.json")
    write_json(path, result)
    return path


def quiet_env(**extra: str) -> dict:
    """The environment of a measured process: the venv first on PATH, TF's C++ logs quiet."""
    env = dict(os.environ)
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def _popen(command: Sequence[str],
           env: Optional[dict],
           out,
           tag: Optional[str] = None) -> subprocess.Popen:
    """Start a command in a process group of its own, its environment (`env`, or this process's)
    tagged with `tag` (a fresh one by default; kept as the process's `run_tag`), and keep it for
    `end_children`; a SIGTERM or SIGINT arriving meanwhile waits until it is kept."""
    tag = tag or proctree.new_tag()
    env = proctree.tagged_environ(os.environ if env is None else env, tag)
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        proc = subprocess.Popen(list(command),
                                env=env,
                                cwd=ROOT,
                                stdout=out,
                                stderr=subprocess.STDOUT if out is not None else None,
                                start_new_session=True)
        proc.run_tag = tag
        _started[:] = [p for p in _started if p.poll() is None or proctree.members(p.run_tag)]
        _started.append(proc)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
    return proc


def run(command: Sequence[str],
        timeout: float,
        env: Optional[dict] = None,
        log: Optional[str] = None) -> tuple[int, float]:
    """Run a command in its own process group; kill the whole group on timeout.

    Returns (exit status, wall seconds); -9 means it was killed at the timeout. Output goes to
    `log` (a file) or is dropped.
    """
    out = open(log, "ab") if log else subprocess.DEVNULL
    start = time.time()
    proc = _popen(command, env, out)
    try:
        status = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        status = -9
    finally:
        if log:
            out.close()
    return status, time.time() - start


def start(command: Sequence[str],
          env: dict,
          log: Optional[str] = None,
          tag: Optional[str] = None) -> subprocess.Popen:
    """Start a command in its own process group, output appended to `log` (None: this
    process's own stdout and stderr), its processes tagged `tag` (bench/proctree.py; a fresh
    tag by default, the process's `run_tag`)."""
    if log is None:
        return _popen(command, env, None, tag)
    with open(log, "ab") as out:
        return _popen(command, env, out, tag)


def wait_all(procs: Sequence[subprocess.Popen], timeout: float) -> list[int]:
    """Wait for every process; on timeout or when one fails, stop the others' groups."""
    deadline = time.monotonic() + timeout
    while any(p.poll() is None for p in procs):
        failed = any(p.returncode not in (None, 0) for p in procs)
        if failed or time.monotonic() > deadline:
            time.sleep(2.0 if failed else 0)  # a failed peer: give the others a moment to exit
            for p in procs:
                if p.poll() is None:
                    kill_group(p)
            break
        time.sleep(0.05)
    return [p.returncode if p.returncode is not None else -9 for p in procs]


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def end_children(grace: float = GRACE) -> None:
    """End every process this driver started and everything they started, as `tfdist launch`
    ends its ranks: SIGCONT (a measured run may be stopped mid-slice), SIGTERM, and SIGKILL to
    what is left after `grace` seconds; each found by its run's tag wherever it runs
    (bench/proctree.py: a launcher's ranks, horovodrun's children and parameter servers have
    process groups of their own)."""
    proctree.end({p.run_tag for p in _started}, grace)
    for p in _started:
        p.poll()


def end_children_on_signals(grace: float = GRACE) -> None:
    """On SIGTERM or SIGINT: `end_children(grace)`, then exit with status 128 + the signal."""

    def handler(signum, frame):
        for sig in _SIGNALS:  # once: a second signal while the children end changes nothing
            signal.signal(sig, signal.SIG_IGN)
        print(
            f"{os.path.basename(sys.argv[0])}: {signal.Signals(signum).name}: ending the "
            "processes it started",
            file=sys.stderr,
            flush=True)
        end_children(grace)
        sys.exit(128 + signum)

    for sig in _SIGNALS:
        signal.signal(sig, handler)


def table(rows: Sequence[Sequence], header: Sequence[str]) -> str:
    """A plain-text table, columns padded to their widest cell."""
    cells = [[str(c) for c in header]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
