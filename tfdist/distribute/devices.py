"""This task's GPUs made the only ones TensorFlow uses, before it creates its devices.

The choice is the cluster layer's (tfdist.cluster.gpus); here it is applied with
`tf.config.set_visible_devices` and `set_memory_growth`. Measured with TF 2.18 (on a CPU
machine): `import tensorflow` does not initialise CUDA, the first `list_physical_devices` does
(cuInit), and the devices are created at the first op or strategy. So the environment variable
would work only until something lists the GPUs, while set_visible_devices works until the first op,
and it leaves every GPU of the task visible to CUDA (NCCL may then reach the node's other GPUs
directly). MIG is the exception: CUDA enumerates only the first MIG device that
CUDA_VISIBLE_DEVICES lists, so there the variable is narrowed, before TensorFlow lists the GPUs.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import MutableMapping
from typing import Optional

from tfdist.cluster import Cluster, Roles
from tfdist.cluster import gpus
from tfdist.distribute.engine import LateInitError

log = logging.getLogger("tfdist")


class DeviceSetupError(RuntimeError):
    """TensorFlow sees fewer GPUs than the task's plan needs."""


def pin_gpus(cluster: Cluster,
             roles: Roles,
             task_gpus: str = "auto",
             memory_growth: bool = True,
             slot: Optional[tuple[int, int]] = None,
             environ: Optional[MutableMapping[str, str]] = None) -> gpus.GpuPlan:
    """Make TensorFlow see only this task's GPUs (memory growth on unless asked otherwise) and
    return the plan. Call before any op, model or strategy: TensorFlow fixes its devices then."""
    environ = os.environ if environ is None else environ
    plan = gpus.plan_for(cluster, roles, environ, task_gpus, slot=slot)
    if plan.mechanism == gpus.VISIBLE:
        environ[gpus.VISIBLE] = plan.visible_value
        environ[gpus.PINNED] = f"{cluster.rank}:{plan.visible_value}"
        plan = gpus.plan_for(cluster, roles, environ, task_gpus, slot=slot)

    import tensorflow as tf

    physical = tf.config.list_physical_devices("GPU")
    if plan.count is None:
        plan = gpus.plan_for(cluster, roles, environ, task_gpus, len(physical), slot=slot)
    for note in plan.notes:
        log.warning("tfdist: GPUs: %s", note)
    if not physical:
        if plan.use:
            log.warning(
                "tfdist: %s lists %d GPU(s) but TensorFlow sees none: training runs on the CPU "
                "(a TensorFlow without CUDA? `tfdist doctor` checks).", gpus.VISIBLE, plan.count)
        return dataclasses.replace(plan, use=(), node_ids=())
    if plan.use and max(plan.use) >= len(physical):
        raise DeviceSetupError(
            f"This task should use {plan.summary()} ({plan.layout}), but TensorFlow sees only "
            f"{len(physical)} GPU(s). Check `nvidia-smi -L` on the node and that nothing changes "
            f"{gpus.VISIBLE} after Slurm set it.")
    chosen = [physical[i] for i in plan.use]
    try:
        tf.config.set_visible_devices(chosen, "GPU")
        if memory_growth:
            for device in chosen:
                tf.config.experimental.set_memory_growth(device, True)
    except RuntimeError as e:
        raise LateInitError(
            f"tfdist.init() must come before TensorFlow runs its first op: TensorFlow created its "
            f"devices before tfdist could give this task {plan.summary()} ({e}). Fix: call "
            "tfdist.init() right after the imports, before loading data or building the "
            "model.") from e
    return plan
