"""Checks of the GPUs this task sees (CUDA_VISIBLE_DEVICES, nvidia-smi) against what Slurm gave it,
of the GPU(s) it would take, and notes from the TensorFlow/Horovod probe. The plan of which GPU each
task takes is the cluster layer's (tfdist.cluster.gpus); the verdicts on it are here."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any, Optional

from tfdist.cluster.base import Cluster
from tfdist.cluster.errors import ClusterError
from tfdist.cluster.gpus import VISIBLE, parse_visible, plan_for, slurm_gpus_requested
from tfdist.cluster.roles import Roles
from tfdist.cluster.slurm import SlurmEnv
from tfdist.doctor.result import INFO, OK, PROBLEM, WARN, Result

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


def check_placement(cluster: Cluster,
                    roles: Roles,
                    environ: Mapping[str, str],
                    visible_count: Optional[int] = None,
                    task_gpus: str = "auto") -> Optional[Result]:
    """The GPU(s) this task takes under `roles` (tfdist.cluster.gpus.plan_for), None when it sees
    none: a layout where tasks would share a GPU is a PROBLEM, GPUs left idle a warning."""
    try:
        plan = plan_for(cluster, roles, environ, task_gpus, visible_count)
    except ClusterError as e:
        return Result("gpus", PROBLEM, str(e))
    if plan.count == 0:
        return None
    if plan.use is None:
        return Result("gpus", INFO, f"{plan.summary()}: {plan.layout}")
    if not plan.use:
        why = f"{roles.strategy} uses none here" if plan.need == "none" else plan.layout
        return Result("gpus", OK, f"no GPU ({why})")
    how = {
        "none": "",
        VISIBLE: f", pinned with {VISIBLE}={plan.visible_value}",
        "set_visible_devices": ", pinned with tf.config.set_visible_devices",
    }[plan.mechanism]
    message = (f"rank {cluster.rank} (task {plan.slot} of {plan.slots} on this node) uses "
               f"{plan.summary()}{how} ({plan.layout})")
    if plan.notes:
        return Result("gpus", WARN, message + ". " + " ".join(plan.notes))
    return Result("gpus", OK, message)


def gpu_notes(probe: Mapping[str, Any], strategy: str) -> list[Result]:
    """"gpus" lines from what the doctor's TensorFlow/Horovod probe found: tensor cores and mixed
    precision, NCCL in Horovod."""
    notes = []
    capabilities = [tuple(c) for c in probe.get("tf_gpu_cc") or [] if c]
    if capabilities:
        best = max(capabilities)
        cc = ", ".join(f"{a}.{b}" for a, b in capabilities)
        if best >= (7, 0):
            kind = "mixed_bfloat16 or mixed_float16" if best >= (8, 0) else "mixed_float16"
            notes.append(
                Result(
                    "gpus", INFO, f"compute capability {cc}: tensor cores would speed training "
                    f"up with --mixed_precision={kind}."))
        else:
            notes.append(
                Result(
                    "gpus", INFO, f"compute capability {cc}: below 7.0, mixed precision gains "
                    "little here; keep --mixed_precision=float32."))
    if strategy == "horovod" and "horovod" in probe:
        if probe.get("nccl"):
            notes.append(
                Result("gpus", OK, "Horovod has NCCL: GPU tensors are all-reduced with NCCL."))
        elif capabilities:
            notes.append(
                Result(
                    "gpus", WARN, "Horovod was built without NCCL: gradients on the GPUs are "
                    "copied to the host and all-reduced with gloo. For GPU nodes build it with "
                    "HOROVOD_GPU_OPERATIONS=NCCL."))
    return notes
