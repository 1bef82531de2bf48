"""The fit driver of `tfdist train`: a named model on a named pipeline under any engine.

It resumes from MODEL_DIR/checkpoints when there is one (at the saved epoch and step, with the same
data order), checkpoints every epoch (and every `checkpoint_steps`), and on SIGTERM/SIGUSR1 stops
every task after the same step, checkpoints and raises Preempted.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from typing import Any, Optional

import tfdist
from tfdist.distribute import LostTaskError
from tfdist.runtime import Runtime

log = logging.getLogger("tfdist")

OPTIMIZERS = ("sgd", "adam")
MIXED_PRECISION = ("float32", "mixed_float16", "mixed_bfloat16")


class Preempted(Exception):
    """Training stopped on a signal after checkpointing; re-running resumes it."""

    exit_status = 75


@dataclasses.dataclass
class TrainConfig:
    model: str = "cnn"
    pipeline: str = "digits"
    strategy: str = "auto"
    num_ps: int = 1
    evaluator: bool = False  # parameter_server: the last task evaluates the checkpoints
    port: Optional[int] = None
    epochs: int = 10
    batch_size: int = 32  # per replica
    lr: float = 0.05  # single-replica rate, scaled by lr_scaling
    lr_scaling: str = "linear"
    warmup_epochs: float = 0.0  # ramp from lr to the scaled rate (Goyal et al., 2017)
    lr_schedule: str = "constant"  # after warmup: constant, cosine or step
    lr_decay_epochs: float = 0.0  # step schedule: decay every this many epochs
    lr_decay_rate: float = 0.1
    optimizer: str = "sgd"
    mixed_precision: str = "float32"
    task_gpus: str = "auto"  # which GPUs each task uses (tfdist.cluster.gpus)
    gpu_memory_growth: bool = True
    model_dir: Optional[str] = None
    checkpoint_steps: int = 0  # 0: checkpoint at each epoch end only
    requeue: bool = False  # on preemption under Slurm, `scontrol requeue` the job (rank 0)
    restart: bool = False  # ignore (and remove) a previous run in model_dir: train anew
    tensorboard: bool = True
    seed: int = 0
    shuffle: bool = True
    steps_per_epoch: int = 0  # 0: one pass over the training split
    data_dir: Optional[str] = None
    pipeline_options: dict[str, Any] = dataclasses.field(default_factory=dict)  # the recipe's
    verbose: Optional[int] = None  # None: progress bar on a terminal, one line per epoch otherwise
    engine_options: dict[str, Any] = dataclasses.field(default_factory=dict)


def make_optimizer(name: str, lr):
    import tensorflow as tf

    if name == "sgd":
        return tf.keras.optimizers.SGD(lr, momentum=0.9)
    if name == "adam":
        return tf.keras.optimizers.Adam(lr)
    raise ValueError(f"Unknown optimizer {name!r}: expected one of {', '.join(OPTIMIZERS)}.")


def train(cfg: TrainConfig) -> Optional[dict[str, Any]]:
    """Train, evaluate on the test split, and (chief) write MODEL_DIR/metrics.json and the model.

    Returns the metrics on every training task; tasks that only serve exit inside tfdist.init.
    """
    from tfdist.train.preemption import PreemptionHandler

    # Before any task connects: a wrong option fails every task at once.
    cfg = dataclasses.replace(cfg, pipeline_options=_pipeline_options(cfg))
    # Signals are caught from here on: one during start-up is acted on at the first check.
    preemption = PreemptionHandler()
    rt = tfdist.init(strategy=cfg.strategy,
                     num_ps=cfg.num_ps,
                     evaluator=cfg.evaluator,
                     port=cfg.port,
                     lr_scaling=cfg.lr_scaling,
                     task_gpus=cfg.task_gpus,
                     gpu_memory_growth=cfg.gpu_memory_growth,
                     **cfg.engine_options)
    try:
        return _evaluate(rt, cfg) if rt.is_evaluator else _train(rt, cfg, preemption)
    except Exception as e:
        message = rt.engine.explain_failure(e)
        if message:
            raise LostTaskError(message) from e
        raise
    finally:
        rt.shutdown()


def _pipeline_options(cfg: TrainConfig) -> dict[str, Any]:
    """cfg.pipeline_options checked against the recipe's signature (typed from strings)."""
    from tfdist.data import load_pipeline
    from tfdist.data.pipeline import check_options

    return check_options(load_pipeline(cfg.pipeline), cfg.pipeline, cfg.pipeline_options)


def learning_rate(rt: Runtime, cfg: TrainConfig, steps: int):
    """The scaled rate, or a WarmupSchedule when warming up or decaying."""
    from tfdist.train.schedules import WarmupSchedule

    peak = rt.scale_lr(cfg.lr)
    if cfg.warmup_epochs <= 0 and cfg.lr_schedule == "constant":
        return peak
    return WarmupSchedule(start_lr=cfg.lr,
                          peak_lr=peak,
                          warmup_steps=round(cfg.warmup_epochs * steps),
                          schedule=cfg.lr_schedule,
                          total_steps=cfg.epochs * steps,
                          decay_steps=round(cfg.lr_decay_epochs * steps),
                          decay_rate=cfg.lr_decay_rate)


def _compiled(model, optimizer):
    import tensorflow as tf

    model.compile(optimizer=optimizer,
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def _test_split(pipeline, cfg: TrainConfig):
    import tensorflow as tf

    return pipeline.dataset("test",
                            tf.distribute.InputContext(),
                            256,
                            shuffle=False,
                            drop_remainder=False,
                            data_dir=cfg.data_dir,
                            **cfg.pipeline_options)


def _evaluate(rt: Runtime, cfg: TrainConfig) -> dict[str, Any]:
    """The parameter-server evaluator: the test split on each new checkpoint of the chief."""
    import tensorflow as tf

    from tfdist.data import load_pipeline
    from tfdist.train.models import build_model
    from tfdist.train.sidecar import evaluate_checkpoints

    if not cfg.model_dir:
        raise ValueError("--evaluator evaluates the checkpoints in --model_dir: give --model_dir.")
    tf.keras.mixed_precision.set_global_policy(cfg.mixed_precision)
    pipeline = load_pipeline(cfg.pipeline)
    info = pipeline.info(cfg.data_dir, **cfg.pipeline_options)
    log.info("tfdist evaluator: evaluating the checkpoints in %s until the chief finishes",
             cfg.model_dir)
    evaluations = evaluate_checkpoints(
        cfg.model_dir,
        lambda: _compiled(build_model(cfg.model, info["input_shape"], info["num_classes"]), "sgd"),
        lambda: _test_split(pipeline, cfg), rt.engine.chief_finished)
    return {"rank": rt.rank, "role": "evaluator", "evaluations": evaluations}


def _train(rt: Runtime, cfg: TrainConfig, preemption) -> dict[str, Any]:
    import tensorflow as tf

    from tfdist.data import load_pipeline
    from tfdist.train import checkpoint
    from tfdist.train.models import build_model
    from tfdist.train.preemption import StepPreemptionHandler
    from tfdist.train.throughput import ThroughputMeter

    if cfg.mixed_precision not in MIXED_PRECISION:
        raise ValueError(f"mixed_precision={cfg.mixed_precision!r}: expected one of "
                         f"{', '.join(MIXED_PRECISION)} (--mixed_precision).")
    tf.keras.mixed_precision.set_global_policy(cfg.mixed_precision)
    pipeline = load_pipeline(cfg.pipeline)
    info = pipeline.info(cfg.data_dir, **cfg.pipeline_options)
    global_batch = rt.global_batch_size(cfg.batch_size)
    steps = cfg.steps_per_epoch or info["num_train"] // global_batch
    if steps < 1:
        raise ValueError(f"--batch_size={cfg.batch_size} x {rt.num_replicas} replicas = "
                         f"{global_batch} is more than the {info['num_train']} training samples "
                         f"of {cfg.pipeline!r}; lower --batch_size.")

    identity = dict(model=cfg.model,
                    strategy=rt.strategy_name,
                    world_size=rt.world_size,
                    global_batch_size=global_batch,
                    seed=cfg.seed)
    start_epoch, skip_steps, seed = 0, 0, cfg.seed
    if cfg.restart and cfg.model_dir:
        _start_anew(rt, cfg.model_dir)
    found = checkpoint.latest(cfg.model_dir) if cfg.model_dir else None
    if found is not None:
        path, meta = found
        checkpoint.check_resume(meta, identity, path)
        start_epoch, skip_steps, seed = meta["epoch"], meta["step"], meta.get("seed", cfg.seed)
        if skip_steps >= steps:
            start_epoch, skip_steps = start_epoch + 1, 0
        identity["seed"] = seed  # the data order continues with the checkpoint's seed
        if start_epoch >= cfg.epochs:
            previous = _already_finished(rt, cfg, path, start_epoch)
            if previous is not None:
                return previous
    tf.keras.utils.set_random_seed(seed)

    def train_input(input_context):
        ds = pipeline.dataset("train",
                              input_context,
                              cfg.batch_size,
                              seed=seed,
                              shuffle=cfg.shuffle,
                              epoch=start_epoch,
                              repeat=True,
                              data_dir=cfg.data_dir,
                              **cfg.pipeline_options)
        if skip_steps and rt.strategy_name != "parameter_server":
            # Continue mid-epoch where the checkpoint was taken: each step took this many
            # batches from this pipeline. (Parameter-server workers race: no exact position.)
            per_step = max(1,
                           input_context.num_replicas_in_sync // input_context.num_input_pipelines)
            ds = ds.skip(skip_steps * per_step)
        return ds

    with rt.scope():
        model = build_model(cfg.model, info["input_shape"], info["num_classes"])
        optimizer = rt.optimizer(make_optimizer(cfg.optimizer, learning_rate(rt, cfg, steps)))
        _compiled(model, optimizer)

    # Keras's epoch line (verbose=2 on the chief) shows samples_per_sec and input_wait.
    meter = ThroughputMeter.for_runtime(rt, cfg.batch_size, steps, log_epochs=False)
    callbacks = rt.callbacks() + [meter]
    saver = None
    if cfg.model_dir:
        steps_between = 0 if rt.strategy_name == "parameter_server" else cfg.checkpoint_steps
        saver = checkpoint.make_checkpoint(cfg.model_dir, rt.is_chief, identity, steps_between)
        callbacks.append(saver)
        if cfg.tensorboard and rt.is_chief:
            callbacks.append(tf.keras.callbacks.TensorBoard(os.path.join(cfg.model_dir, "logs")))
    if rt.strategy_name != "parameter_server":  # PS refuses batch-level callbacks
        # Several tasks agree about once a second (one tiny collective), a single one every step.
        preemption = StepPreemptionHandler(10 if rt.world_size > 1 else 1,
                                           taking_over=preemption,
                                           several_tasks=rt.world_size > 1)
    callbacks.append(preemption.attach(rt.engine, saver))

    verbose = cfg.verbose if cfg.verbose is not None else (1 if sys.stdout.isatty() else 2)
    history = model.fit(rt.dataset(train_input),
                        epochs=cfg.epochs,
                        steps_per_epoch=steps,
                        callbacks=callbacks,
                        verbose=verbose if rt.is_chief else 0)

    if preemption.preempted_at is not None:
        epoch, step = preemption.preempted_at
        requeued, failed = _requeue(cfg, rt)
        # No task leaves before rank 0 has requeued: under `srun --kill-on-bad-exit` an early
        # exit would get rank 0 killed first.
        rt.barrier()
        where = preemption.saved or (cfg.model_dir and "MODEL_DIR/checkpoints") or "nowhere"
        at = f"after epoch {epoch}" if step == 0 else f"at epoch {epoch + 1}, step {step}"
        raise Preempted(f"preempted {at}; checkpoint: {where}. " +
                        ("The job was requeued and resumes from it." if requeued else
                         (f"{failed}. " if failed else "") +
                         "Re-run the same command (same --model_dir) "
                         "to resume."))

    # The test split is evaluated by a plain copy of the model, outside the strategy: the same on
    # every engine, and no collective that a task could miss.
    local = _compiled(build_model(cfg.model, info["input_shape"], info["num_classes"]), "sgd")
    local.set_weights(model.get_weights())
    test_loss, test_accuracy = local.evaluate(_test_split(pipeline, cfg), verbose=0)

    metrics = {
        "strategy": rt.strategy_name,
        "environment": rt.cluster.environment,
        "num_replicas": rt.num_replicas,
        "world_size": rt.world_size,
        "rank": rt.rank,
        "global_batch_size": global_batch,
        "per_replica_batch_size": cfg.batch_size,
        "learning_rate": rt.scale_lr(cfg.lr),
        "mixed_precision": cfg.mixed_precision,
        "loss_scale": _loss_scale(model.optimizer),
        "epochs": cfg.epochs,
        "steps_per_epoch": steps,
        "train_samples": info["num_train"],  # one pass over the split (tfdist scale: time/epoch)
        "resumed_from": list(saver.resumed_from) if saver and saver.resumed_from else None,
        "model": cfg.model,
        "pipeline": cfg.pipeline,
        "samples_per_sec": meter.steady_samples_per_sec,
        "epoch_samples_per_sec": meter.epoch_rates,
        # Share of step time spent waiting for the input batch: the most-waiting task's
        # (parameter_server: the workers' mean); None where not timed.
        "input_wait": meter.steady_input_wait,
        "epoch_input_wait": meter.epoch_input_wait,
        "epoch_input_wait_per_task": meter.epoch_input_wait_per_task,
        "final": {
            "loss": float(history.history["loss"][-1]) if history.history else None,
            "accuracy": float(history.history["accuracy"][-1]) if history.history else None,
            "test_loss": float(test_loss),
            "test_accuracy": float(test_accuracy),
        },
    }
    if rt.is_chief:
        log.info("test accuracy %.4f, %.0f samples/s", test_accuracy, metrics["samples_per_sec"])
        if cfg.model_dir:
            _write_results(cfg.model_dir, local, metrics)
    return metrics


RUN_OUTPUTS = ("checkpoints", "logs", "metrics.json", "model.keras")


def _start_anew(rt: Runtime, model_dir: str) -> None:
    """--restart: the chief removes the previous run's outputs before any task looks at them."""
    import shutil

    if rt.is_chief:
        for name in RUN_OUTPUTS:
            path = os.path.join(model_dir, name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)
        log.info("tfdist: --restart: removed the previous run's %s from %s", ", ".join(RUN_OUTPUTS),
                 model_dir)
    rt.barrier()


def _already_finished(rt: Runtime, cfg: TrainConfig, path: str,
                      epoch: int) -> Optional[dict[str, Any]]:
    """The kept metrics of a run whose checkpoint has all its epochs: nothing is trained again.
    None when its metrics.json was never written (then the run ends as usual: evaluated)."""
    import json

    try:
        with open(os.path.join(cfg.model_dir, "metrics.json")) as f:
            previous = json.load(f)
    except FileNotFoundError:
        return None
    return dict(previous,
                rank=rt.rank,
                already_finished={
                    "checkpoint": path,
                    "epochs_done": epoch,
                    "epochs": cfg.epochs
                })


def _loss_scale(optimizer) -> Optional[float]:
    """The dynamic loss scale Keras put in place for mixed_float16 (its value now), else None."""
    import tensorflow as tf

    scale = getattr(optimizer, "loss_scale", None)
    return None if scale is None else float(tf.keras.backend.get_value(scale))


def _requeue(cfg: TrainConfig, rt: Runtime) -> tuple[bool, Optional[str]]:
    """(requeued, why not): rank 0 asks Slurm once; a failure is reported, never dropped."""
    from tfdist.train.preemption import RequeueFailed, requeue_slurm_job

    if not (cfg.requeue and rt.rank == 0):
        return False, None
    try:
        return requeue_slurm_job(), None
    except RequeueFailed as e:
        log.error("tfdist: %s", e)
        return False, str(e)


def _write_results(model_dir: str, model, metrics: dict[str, Any]) -> None:
    from tfdist.train.atomic import write_json

    os.makedirs(model_dir, exist_ok=True)
    path = os.path.join(model_dir, "model.keras")
    tmp = os.path.join(model_dir, ".tmp-model.keras")
    model.save(tmp)
    os.replace(tmp, path)
    write_json(os.path.join(model_dir, "metrics.json"), metrics)
