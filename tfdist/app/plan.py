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
        keras: the Keras `tfdist train` builds with, 2 (tf-keras) or 3 (Keras 3) (--keras, else
            the one tf.keras is); stated, and refused as train refuses it. The counts are of
            tf-keras's build of the same layers (the same parameters; Keras 3's optimizer has one
            more scalar, its learning rate).
        lr_scaling: how train scales lr to the replicas in sync: "linear", "sqrt" or "none"
            (--lr_scaling); the table's `lr` column.
        warmup_epochs, lr_schedule, lr_decay_epochs, lr_decay_rate: the rate's course in time as
            train follows it (--warmup_epochs, --lr_schedule, ...): the table's rates are where
            the warmup ends; the plan says how train gets there and what follows.
        pipeline_options: the recipe's options, key -> value as given (--pipeline_option):
            checked against the recipe as train checks them, and passed to its info().
        strategy: the strategy train is asked for (--strategy): the default optimizer and lr,
            and whether the table's replicas are one worker's GPUs (parameter_server).
        num_ps: parameter_server's ps tasks (--num_ps): the role layout and the bytes per ps task.
        evaluator: parameter_server's evaluator task (--evaluator): the role layout.
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
    keras: int = 3
    lr_scaling: str = "linear"
    warmup_epochs: float = 0.0
    lr_schedule: str = "constant"
    lr_decay_epochs: float = 0.0
    lr_decay_rate: float = 0.1
    pipeline_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    strategy: str = "auto"
    num_ps: int = 1
    evaluator: bool = False
    measure: bool = False


def make_plan(o: PlanOptions) -> dict[str, Any]:
    """The plan as `tfdist plan --format=json` prints it."""
    import tensorflow as tf
    import tf_keras

    from tfdist.app import memory
    from tfdist.app.config import check_lr_course
    from tfdist.app.models import build_model, compile_classifier
    from tfdist.app.schedules import make_optimizer
    from tfdist.keras_compat import keras_module
    from tfdist.runtime import check_lr_scaling

    keras_module(o.keras)  # train's refusal of a Keras it cannot build with
    check_lr_scaling(o.lr_scaling)
    check_lr_course(o.lr_schedule, o.lr_decay_epochs)
    tf_keras.mixed_precision.set_global_policy(o.mixed_precision)
    shape, classes, pipeline_options = _input(o)
    model = build_model(o.model, shape, classes, tf_keras)
    optimizer = make_optimizer(o.optimizer, o.lr, tf_keras)
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
        "parameter_server":
        parameter_server(o.num_ps, o.evaluator, mem.weight_bytes + mem.slot_bytes,
                         _largest_variable_bytes(model, optimizer)),
        "replicas":
        lr_table(o.lr, batch, o.replicas, o.lr_scaling),
        "lr":
        o.lr,
        "lr_scaling":
        o.lr_scaling,
        "lr_course":
        lr_course(o),
        "strategy":
        o.strategy,
        "keras":
        o.keras,
        "pipeline":
        o.pipeline,
        "pipeline_options":
        pipeline_options,
        # False: --input_shape and --num_classes gave the input (the options only checked)
        "input_from_pipeline":
        not (o.input_shape and o.num_classes),
    }
    if o.measure:
        device = "GPU:0" if tf.config.list_logical_devices("GPU") else "CPU:0"
        compile_classifier(model, optimizer, tf_keras)
        measured = memory.measure_step_peak(model, batch, device=device)
        estimate = mem.replica_bytes("multi_worker", batch)
        plan["measured"] = dict(measured,
                                device=device,
                                estimate_bytes=estimate,
                                factor=measured["peak_bytes"] / estimate)
    return plan


def lr_course(o: PlanOptions) -> dict[str, Any]:
    """The rate's course over the epochs, as tfdist.app.schedules.learning_rate makes it: a
    linear warmup from --lr to the table's rate over `warmup_epochs`, then `schedule`."""
    course: dict[str, Any] = {"warmup_epochs": o.warmup_epochs, "schedule": o.lr_schedule}
    if o.lr_schedule == "step":
        course.update(decay_epochs=o.lr_decay_epochs, decay_rate=o.lr_decay_rate)
    return course


def lr_table(lr: float, batch: int, replicas, rule: str) -> list[dict[str, Any]]:
    """Per replica count N: the global batch, lr scaled by each rule, and `lr` by `rule`, the
    one `tfdist train --lr_scaling=rule` trains with N replicas in sync (at the end of any
    warmup)."""
    from tfdist.runtime import scale_lr

    return [{
        "replicas": n,
        "global_batch_size": batch * n,
        "lr_linear": scale_lr(lr, n, "linear"),
        "lr_sqrt": scale_lr(lr, n, "sqrt"),
        "lr": scale_lr(lr, n, rule),
    } for n in replicas]


def parameter_server(num_ps: int, evaluator: bool, ps_bytes: int,
                     largest_variable_bytes: int) -> dict[str, Any]:
    """parameter_server's layout for --num_ps and --evaluator: the tasks besides the workers
    (tfdist.cluster.roles: task 0 the chief, the next num_ps ps, the rest workers, the last the
    evaluator), and the bytes of weights and slots per ps task. TensorFlow places whole
    variables round-robin over the ps tasks: the average is ps_bytes / num_ps, and the fullest
    task holds at least that and at least the largest variable with its slots."""
    if num_ps < 1:  # the flag's bound; as tfdist.cluster.roles says it to a caller without one
        from tfdist.cluster.roles import parameter_server_types

        parameter_server_types(1 + num_ps + 1 + int(evaluator), num_ps, evaluator)
    return {
        "num_ps": num_ps,
        "evaluator": evaluator,
        "tasks_besides_workers": 1 + num_ps + int(evaluator),
        "ps_task_bytes_average": ps_bytes // num_ps,
        "ps_task_bytes_at_least": max(largest_variable_bytes, ps_bytes // num_ps),
    }


def _largest_variable_bytes(model, optimizer) -> int:
    """The bytes of the model's largest variable with its optimizer slots (the slots are
    colocated with it): its bytes times 1 + the optimizer's non-scalar bytes per trainable
    byte (1 for SGD's momentum, 2 for Adam's m and v)."""
    import numpy as np
    import tensorflow as tf

    def size(v) -> int:
        return int(np.prod(v.shape)) * tf.as_dtype(v.dtype).size

    trainable = {id(v) for v in model.trainable_variables}
    trainable_bytes = sum(size(v) for v in model.trainable_variables)
    slot_bytes = sum(size(v) for v in optimizer.variables if len(v.shape) > 0)
    per_byte = slot_bytes / trainable_bytes if trainable_bytes else 0.0
    return max(
        (round(size(v) * (1 + per_byte)) if id(v) in trainable else size(v) for v in model.weights),
        default=0)


def _input(o: PlanOptions) -> tuple[tuple[int, ...], int, dict[str, Any]]:
    """One sample's shape, the classes and the recipe's checked options: the shape and classes
    as given, else the pipeline's info() with the options, as train reads them. The options are
    checked as train checks them, given shape and classes or not."""
    if o.input_shape and o.num_classes and not o.pipeline_options:
        return tuple(o.input_shape), o.num_classes, {}
    from pipelines import check_options, load_pipeline

    pipeline = load_pipeline(o.pipeline)
    options = check_options(pipeline, o.pipeline, o.pipeline_options)
    if o.input_shape and o.num_classes:
        return tuple(o.input_shape), o.num_classes, options
    info = pipeline.info(o.data_dir, **options)
    shape = tuple(o.input_shape) if o.input_shape else tuple(info["input_shape"])
    return shape, o.num_classes or info["num_classes"], options


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
