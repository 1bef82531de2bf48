"""What `tfdist plan` computes: memory per replica and batch per strategy for one of `tfdist
train`'s models, from the built Keras model and optimizer (tfdist.app.memory); no training unless
asked to measure. The command's flags and its text are tfdist.cli.plan's."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlanOptions:
    """What to plan; each option is a flag of `tfdist plan` (or of `tfdist train`, which it shares).

    Attributes:
        model: the model, a name of tfdist.app.models (--model).
        optimizer: "sgd" or "adam", its slots counted from the built optimizer (--optimizer, the
            strategy's default when not given).
        lr: the learning rate for one replica's batch (--lr, the strategy's default when not
            given); scaled for the replica counts.
        mixed_precision: the Keras precision policy the model is built under (--mixed_precision).
        batch_size: samples per replica (--batch_size).
        input_shape: one sample's shape (--input_shape); None: the pipeline's.
        num_classes: classes (--num_classes); None: the pipeline's.
        pipeline: the recipe whose info() gives what input_shape or num_classes leave open
            (--pipeline).
        data_dir: that recipe's data_dir (--data_dir).
        gpu_memory: bytes of one replica's device as written, e.g. "80GB" (--gpu_memory); None:
            no fit check and no largest batch.
        replicas: replica counts of the global batch and learning-rate table (--replicas).
        measure: also train two steps on this machine's first GPU, else its CPU, and read
            TensorFlow's peak memory (--measure).
    """

    model: str
    optimizer: str
    lr: float
    mixed_precision: str
    batch_size: int
    input_shape: Optional[tuple[int, ...]] = None
    num_classes: Optional[int] = None
    pipeline: str = "digits"
    data_dir: Optional[str] = None
    gpu_memory: Optional[str] = None
    replicas: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    measure: bool = False


def make_plan(o: PlanOptions) -> dict[str, Any]:
    """The plan as `tfdist plan --format=json` prints it."""
    import tensorflow as tf
    import tf_keras

    from tfdist.app import memory
    from tfdist.app.models import build_model, compile_classifier
    from tfdist.app.schedules import make_optimizer
    from tfdist.runtime import scale_lr

    tf_keras.mixed_precision.set_global_policy(o.mixed_precision)
    shape, classes = _input(o)
    model = build_model(o.model, shape, classes)
    optimizer = make_optimizer(o.optimizer, o.lr)
    if o.mixed_precision == "mixed_float16":  # what compile does: dynamic loss scaling
        optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
    mem = memory.model_memory(model, optimizer)
    batch = o.batch_size
    device_bytes = memory.parse_bytes(o.gpu_memory) if o.gpu_memory else None
    plan = {
        "model":
        o.model,
        "input_shape":
        list(shape),
        "num_classes":
        classes,
        "optimizer":
        o.optimizer,
        "mixed_precision":
        o.mixed_precision,
        "batch_size":
        batch,
        "count_params":
        model.count_params(),
        "memory":
        memory.as_dict(mem),
        "activation_bytes":
        mem.activation_bytes(batch),
        "device_memory_bytes":
        device_bytes,
        "gpu_memory":
        o.gpu_memory,
        "strategies":
        _strategies(mem, batch, device_bytes),
        "ps_bytes":
        mem.weight_bytes + mem.slot_bytes,
        "replicas": [{
            "replicas": n,
            "global_batch_size": batch * n,
            "lr_linear": scale_lr(o.lr, n, "linear"),
            "lr_sqrt": scale_lr(o.lr, n, "sqrt"),
        } for n in o.replicas],
        "lr":
        o.lr,
    }
    if o.measure:
        device = "GPU:0" if tf.config.list_logical_devices("GPU") else "CPU:0"
        compile_classifier(model, optimizer)
        measured = memory.measure_step_peak(model, batch, device=device)
        estimate = mem.replica_bytes("multi_worker", batch)
        plan["measured"] = dict(measured,
                                device=device,
                                estimate_bytes=estimate,
                                factor=measured["peak_bytes"] / estimate)
    return plan


def _input(o: PlanOptions) -> tuple[tuple[int, ...], int]:
    """One sample's shape and the classes: as given, else the pipeline's."""
    if o.input_shape and o.num_classes:
        return tuple(o.input_shape), o.num_classes
    from pipelines import load_pipeline

    info = load_pipeline(o.pipeline).info(o.data_dir)
    shape = tuple(o.input_shape) if o.input_shape else tuple(info["input_shape"])
    return shape, o.num_classes or info["num_classes"]


def _strategies(mem, batch: int, device_bytes: Optional[int]) -> dict[str, dict[str, Any]]:
    """Per strategy: the bytes on one replica's device, whether that fits, the largest batch."""
    from tfdist.app.memory import STRATEGIES

    strategies = {}
    for name in STRATEGIES:
        need = mem.replica_bytes(name, batch)
        strategies[name] = {
            "replica_bytes": need,
            "fits": None if device_bytes is None else need <= device_bytes,
            "largest_batch":
            None if device_bytes is None else mem.largest_batch(name, device_bytes),
        }
    return strategies
