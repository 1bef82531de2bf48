"""Checks of the GPUs this task sees (CUDA_VISIBLE_DEVICES, nvidia-smi) against what Slurm gave it;
the plan of which GPU each task takes is the cluster layer's (tfdist.cluster.gpus)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from typing import Optional

from tfdist.cluster.gpus import VISIBLE, parse_visible, slurm_gpus_requested
from tfdist.cluster.slurm import SlurmEnv
from tfdist.doctor.result import OK, PROBLEM, WARN, Result

_GPU_OPTION = "sbatch --gpus-per-node={n} (or --gres=gpu:{n})"


def nvidia_smi_count(timeout: float = 20.0) -> tuple[Optional[int], str]:
    """(GPUs `nvidia-smi -L` lists, how that was learnt); None when it is absent or fails."""
    path = shutil.which("nvidia-smi")
    if path is None:
        return None, "no nvidia-smi on PATH"
    try:
        r = subprocess.run([path, "-L"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"nvidia-smi -L failed ({e})"
    if r.returncode != 0:
        why = (r.stdout + r.stderr).strip().splitlines()
        return 0, f"nvidia-smi -L failed ({why[0] if why else f'exit {r.returncode}'})"
    count = sum(1 for line in r.stdout.splitlines() if line.startswith("GPU "))
    return count, f"nvidia-smi -L lists {count}"


def gpus_seen(environ: Mapping[str, str]) -> tuple[int, str]:
    """(GPUs this task can use, how that was learnt) from CUDA_VISIBLE_DEVICES and nvidia-smi."""
    smi, smi_note = nvidia_smi_count()
    cvd = environ.get(VISIBLE)
    if cvd is None:
        return smi or 0, f"{VISIBLE} unset, {smi_note}"
    visible = len(parse_visible(cvd))
    seen = visible if smi is None else min(visible, smi)
    return seen, f"{VISIBLE}={cvd!r}, {smi_note}"


def check_gpus(environ: Optional[Mapping[str, str]] = None,
               local_tasks: int = 1,
               seen: Optional[tuple[int, str]] = None) -> Result:
    """GPUs seen by this task (`gpus_seen`) against the GPUs Slurm allocated to it or its node."""
    environ = os.environ if environ is None else environ
    seen, how = gpus_seen(environ) if seen is None else seen
    asked = slurm_gpus_requested(environ)
    under_slurm = SlurmEnv.is_present(environ)
    if asked is None:
        if seen == 0:
            return Result(
                "gpus", WARN, f"no GPU visible ({how}): TensorFlow will train on the CPU. Fine "
                "for a CPU job; for GPUs request them with " + _GPU_OPTION.format(n="N") + ".")
        if under_slurm:
            return Result(
                "gpus", WARN, f"this task sees {seen} GPU(s) ({how}) but the job requested none; "
                f"request them with {_GPU_OPTION.format(n=seen)} so Slurm reserves them for "
                "this job.")
        return Result("gpus", OK, f"{seen} GPU(s) visible ({how})")
    count, source, per_task = asked
    # Tasks of one node either all see the node's GPUs (each picks one by local rank) or are
    # bound to an equal share of them (--gpu-bind, --gpus-per-task).
    if seen == count or (not per_task and local_tasks > 1 and seen * local_tasks == count):
        return Result("gpus", OK, f"{seen} GPU(s) seen, as requested ({source}; {how})")
    where = "this task" if per_task else "this node"
    if seen < count:
        todo = ("Check that the job script does not set CUDA_VISIBLE_DEVICES itself and that the "
                "node's driver works (nvidia-smi -L); or request what the node can give: "
                f"{_GPU_OPTION.format(n=seen)}.")
    else:
        todo = (f"TensorFlow would also use GPUs not allocated to this job. Request them with "
                f"{_GPU_OPTION.format(n=seen)}, or leave CUDA_VISIBLE_DEVICES to Slurm.")
    return Result(
        "gpus", PROBLEM, f"Slurm allocated {count} GPU(s) to {where} ({source}), but this "
        f"task sees {seen} ({how}). {todo}")
