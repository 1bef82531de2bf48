"""The elements to Slurm: sbatch job arrays through jobs/JOB.sbatch, split where there are more
than the cluster's MaxArraySize, each submission recorded in DIR/sweep.json at once."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Optional

from tfdist import env_vars
from tfdist.errors import ConfigError
from tfdist.study.sweep.record import save

SWEEP_DIR, SWEEP_OFFSET = env_vars.SWEEP_DIR.name, env_vars.SWEEP_OFFSET.name
JOBS_DIR = env_vars.JOBS_DIR.name
DEFAULT_MAX_ARRAY_SIZE = 1001  # Slurm's default MaxArraySize: indices 0..1000

# How a Slurm command is run: `run_slurm` below, a fake in the tests.
Runner = Callable[[list[str]], subprocess.CompletedProcess]


def run_slurm(cmd: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise ConfigError(f"`{cmd[0]}` is not on PATH: tfdist sweep submits to Slurm; run it "
                          "on a machine of the cluster (a login node).") from None


def max_array_size(run: Runner = run_slurm) -> int:
    """Slurm's MaxArraySize (array indices run 0..MaxArraySize-1)."""
    out = run(["scontrol", "show", "config"]).stdout
    found = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, re.M)
    return int(found.group(1)) if found else DEFAULT_MAX_ARRAY_SIZE


def array_chunks(indices: Iterable[int], max_size: int) -> list[tuple[int, list[int]]]:
    """Element indices split into arrays whose task ids stay below `max_size`: (offset, task ids),
    element index = offset + task id."""
    chunks: dict[int, list[int]] = {}
    for index in sorted(set(indices)):
        offset = index // max_size * max_size
        chunks.setdefault(offset, []).append(index - offset)
    return sorted(chunks.items())


def array_spec(task_ids: Sequence[int], max_running: Optional[int] = None) -> str:
    """sbatch --array's value: ranges ("0-3,7"), throttled with %N."""
    ranges, ids = [], sorted(task_ids)
    start = prev = ids[0]
    for i in ids[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        ranges.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ",".join(ranges) + (f"%{max_running}" if max_running else "")


def submit(directory: str,
           sweep: dict[str, Any],
           indices: Sequence[int],
           jobs_dir: str,
           max_running: Optional[int] = None,
           run: Runner = run_slurm) -> list[dict[str, Any]]:
    """sbatch the elements `indices` as job arrays (several when there are more than the
    cluster's MaxArraySize); records and returns the submissions."""
    script = os.path.join(jobs_dir, f"{sweep['job']}.sbatch")
    if not os.path.isfile(script):
        raise ConfigError(f"No batch script {script} for --job={sweep['job']}: set "
                          "TFDIST_JOBS_DIR to the jobs/ folder of a tfdist checkout.")
    os.makedirs(os.path.join(directory, "logs"), exist_ok=True)
    directory = os.path.abspath(directory)
    tail = list(sweep["train_args"]) + (["--", *sweep["command"]] if sweep["command"] else [])
    made = []
    for offset, tasks in array_chunks(indices, max_array_size(run)):
        cmd = [
            "sbatch",
            "--parsable",
            f"--array={array_spec(tasks, max_running)}",
            f"--job-name={os.path.basename(directory)}",
            f"--output={os.path.join(directory, 'logs', '%A_%a.out')}",
            # The jobs/ folder too: an element's script finds it without asking slurmctld.
            f"--export=ALL,{SWEEP_DIR}={directory},{SWEEP_OFFSET}={offset},"
            f"{JOBS_DIR}={os.path.abspath(jobs_dir)}",
            *sweep["sbatch_args"],
            script,
            *tail
        ]
        done = run(cmd)
        if done.returncode != 0:
            raise ConfigError(f"sbatch refused the array: {done.stderr.strip() or done.stdout}\n"
                              f"  {shlex.join(cmd)}")
        array_job = done.stdout.strip().split(";")[0]
        made.append({
            "array_job": array_job,
            "offset": offset,
            "indices": [offset + t for t in tasks],
            "submitted": time.strftime("%Y-%m-%d %H:%M:%S"),
        })
        sweep["submissions"].append(made[-1])
        save(directory, sweep)  # recorded at once: a later failure keeps what was submitted
    return made
