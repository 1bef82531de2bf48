"""The fit driver of `tfdist train`: a named model on a named pipeline under any engine, with the
calls a user's own script makes (rt.resume, rt.dataset, rt.callbacks: checkpoints, exact resume,
preemption, meter, TensorBoard, metrics.json)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import sys
from typing import Any, Optional

import tfdist
from tfdist.distribute.default_strategy import outside
from tfdist.distribute import LostTaskError
from tfdist.errors import ConfigError
from tfdist.files import replacing
from tfdist.app.auto_steps import (MOST, PARAMETER_SERVER_LEAST, StepClock, choose, pays, saving,
                                   switch_seconds, target_seconds)
from tfdist.app.auto_steps import scheduled as steps_scheduled
from tfdist.app.config import AUTO, TrainConfig
from tfdist.train.summary import metrics_path

log = logging.getLogger("tfdist")


def train(cfg: TrainConfig) -> Optional[dict[str, Any]]:
    """Train, evaluate on the test split, and (chief) write MODEL_DIR/metrics.json and the model.
    Returns the metrics on every training task (tasks that only serve exit inside tfdist.init);
    raises Preempted (exit 75) when stopped by a signal."""
    from pipelines import check_options, load_pipeline
    from tfdist.runtime import run_directory
    from tfdist.train.preemption import catch_signals

    # Before any task connects: a wrong option fails every task at once.
    options = check_options(load_pipeline(cfg.pipeline), cfg.pipeline, cfg.pipeline_options)
    cfg = dataclasses.replace(cfg, pipeline_options=options)
    run_directory(cfg.model_dir, os.environ, "tfdist train")  # the job's $MODEL_DIR, or refused
    if cfg.model_dir and cfg.preemption:
        catch_signals()  # from here on: one during start-up is acted on at the first check
    rt = tfdist.init(strategy=cfg.strategy,
                     num_ps=cfg.num_ps,
                     evaluator=cfg.evaluator,
                     port=cfg.port,
                     lr_scaling=cfg.lr_scaling,
                     task_gpus=cfg.task_gpus,
                     gpu_memory_growth=cfg.gpu_memory_growth,
                     **cfg.engine_options)
    cfg = cfg.for_strategy(rt.strategy_name)  # optimizer, lr, epochs: the strategy's defaults
    try:
        if rt.is_evaluator:
            return _evaluate(rt, cfg)
        metrics = _train(rt, cfg)
        rt.barrier()  # no task leaves while another still evaluates (the chief serves them all)
        return metrics
    except Exception as e:
        message = rt.engine.explain_failure(e)
        if message:
            from tfdist.train.watchdog import current

            if current() is not None:  # stacks, who stopped, requeue; then exit status 1
                current().end_now(message)
            raise LostTaskError(message) from e
        raise
    finally:
        rt.shutdown()


def _pipeline(cfg: TrainConfig):
    """The precision policy set, the pipeline and its info."""
    from pipelines import load_pipeline
    from tfdist.keras_compat import keras_module

    keras_module(cfg.keras).mixed_precision.set_global_policy(cfg.mixed_precision)
    pipeline = load_pipeline(cfg.pipeline)
    return pipeline, pipeline.info(cfg.data_dir, **cfg.pipeline_options)


def _test_split(pipeline, cfg: TrainConfig):
    import tensorflow as tf

    ctx = tf.distribute.InputContext()
    return pipeline.dataset("test",
                            ctx,
                            256,
                            shuffle=False,
                            drop_remainder=False,
                            data_dir=cfg.data_dir,
                            **cfg.pipeline_options)


def _evaluate(rt, cfg: TrainConfig) -> dict[str, Any]:
    """The parameter-server evaluator: the test split on each new checkpoint of the chief."""
    from tfdist.keras_compat import keras_module
    from tfdist.app.models import compiled_model
    from tfdist.train.sidecar import evaluate_checkpoints

    if not cfg.model_dir:
        raise ConfigError("--evaluator evaluates the checkpoints in --model_dir: give --model_dir.")
    pipeline, info = _pipeline(cfg)
    log.info("evaluator: evaluating the checkpoints in %s until the chief finishes", cfg.model_dir)
    keras = keras_module(cfg.keras)
    evaluations = evaluate_checkpoints(cfg.model_dir,
                                       lambda: compiled_model(cfg.model, info, "sgd", keras),
                                       lambda: _test_split(pipeline, cfg), rt.engine.chief_finished)
    return {"rank": rt.rank, "role": "evaluator", "evaluations": evaluations}


def _train(rt, cfg: TrainConfig) -> dict[str, Any]:
    from tfdist.keras_compat import keras_module
    from tfdist.app.models import compile_classifier, compiled_model
    from tfdist.app.schedules import learning_rate, make_optimizer

    keras = keras_module(cfg.keras)
    pipeline, info = _pipeline(cfg)
    pass_steps = info["num_train"] // rt.global_batch_size(cfg.batch_size)  # one pass of the data
    steps = cfg.steps_per_epoch or pass_steps
    if pass_steps < 1:
        raise ConfigError(f"--batch_size={cfg.batch_size} x {rt.num_replicas} replicas is more "
                          f"than the {info['num_train']} training samples of {cfg.pipeline!r}; "
                          "lower --batch_size.")
    if cfg.restart and cfg.model_dir:
        _start_anew(rt, cfg.model_dir)
    # A resumed run continues with the checkpoint's data-order seed, at its epoch and step.
    start = rt.resume(cfg.model_dir, cfg.batch_size, model=cfg.model, keras=cfg.keras)
    if start.epoch >= cfg.epochs and os.path.exists(metrics_path(cfg.model_dir)):
        with open(metrics_path(cfg.model_dir)) as f:  # every task decides alike: nothing to do
            done = dict(checkpoint=start.path, epochs_done=start.epoch, epochs=cfg.epochs)
            return dict(json.load(f), rank=rt.rank, already_finished=done)
    seed = cfg.seed if start.seed is None else start.seed
    keras.utils.set_random_seed(seed)
    options = dict(seed=seed, shuffle=cfg.shuffle, data_dir=cfg.data_dir, **cfg.pipeline_options)

    def train_input(epoch: int, step: int):
        """The input from `step` steps into `epoch` (of `steps` steps) on."""

        def made(ctx, **kwargs):
            return pipeline.dataset("train", ctx, cfg.batch_size, **options, **kwargs)

        if not rt.engine.capabilities.exact_resume:  # parameter_server: the epoch's pass (and
            # rt.dataset says that the data starts over)
            return rt.dataset(lambda ctx: made(ctx, repeat=True, epoch=epoch), skip_steps=step)

        def dataset_fn(ctx):
            data_pass, skip = _data_position(epoch * steps + step, ctx, made(ctx, repeat=False),
                                             pass_steps)
            return made(ctx, repeat=True, epoch=data_pass).skip(skip)

        return rt.dataset(dataset_fn, starts_at_step=step)

    auto = cfg.steps_per_execution == AUTO
    with rt.scope():
        lr = learning_rate(cfg, rt.scale_lr(cfg.lr), steps)
        optimizer = rt.optimizer(make_optimizer(cfg.optimizer, lr, keras))
        model = compiled_model(cfg.model, info, optimizer, keras,
                               1 if auto else cfg.steps_per_execution)
    # Keras's progress bar on a terminal; in a batch log one line per epoch (the chief).
    verbose = cfg.verbose if cfg.verbose is not None else (1 if sys.stdout.isatty() else 0)
    callbacks = rt.callbacks(cfg.model_dir,
                             batch_size=cfg.batch_size,
                             progress=verbose == 0,
                             checkpoint_steps=cfg.checkpoint_steps,
                             requeue=cfg.requeue,
                             tensorboard=cfg.tensorboard,
                             meter=cfg.meter,
                             preemption=cfg.preemption,
                             watchdog_timeout=cfg.watchdog_timeout,
                             profile_steps=cfg.profile_steps,
                             profile_ranks=cfg.profile_ranks,
                             identity=dict(model=cfg.model, seed=seed))
    fit = dict(
        steps_per_epoch=steps,
        callbacks=callbacks,
        shuffle=False,  # the pipeline shuffles (Keras 3 warns that it would not)
        verbose=verbose if rt.is_chief else 0)
    count = 1 if auto else cfg.steps_per_execution  # steps a call from the second epoch on
    fixed = auto and _auto_fixed(cfg, rt, start.epoch, callbacks)
    clock = None
    if fixed:
        log.info("steps_per_execution auto: 1 (%s)", fixed)
    elif auto:  # the first epoch at one step a call, timed; the others at the count chosen

        def decide(clock: StepClock) -> int:
            count = _agreed_count(rt, clock, steps, start.epoch, cfg.epochs,
                                  cfg.checkpoint_steps if cfg.model_dir else 0)
            if count > 1 and callbacks.summary is not None:  # a second fit: no metrics.json yet
                callbacks.summary.write_at_end = False
            return count

        clock = StepClock(decide)  # above 1 the fit ends with that epoch
        callbacks.append(clock)
    model.fit(train_input(start.epoch, start.step), epochs=cfg.epochs, **fit)
    if clock is not None:
        callbacks.remove(clock)
        count = clock.count or 1
        if count > 1:  # the other epochs in a second fit, at the count chosen
            if callbacks.summary is not None:
                callbacks.summary.write_at_end = True
            if callbacks.checkpoint is not None:
                callbacks.checkpoint.restore = False  # the model in memory is where the run is
            with rt.scope():
                # The optimizer compiled (its state kept), as Keras holds it: under
                # mixed_float16 the LossScaleOptimizer, which a second compile must not wrap
                # again (tf-keras: '"inner_optimizer" is already wrapped').
                compile_classifier(model, model.optimizer, keras, count)
            epoch = start.epoch + 1
            model.fit(train_input(epoch, 0), initial_epoch=epoch, epochs=cfg.epochs, **fit)
    # The test split is evaluated by a plain copy of the model, outside the strategy (also the
    # program's default one): the same on every engine, and no collective that a task could miss
    # (only the chief saves it).
    with outside():
        local = compiled_model(cfg.model, info, "sgd", keras)
        local.set_weights(model.get_weights())
        test_loss, test_accuracy = local.evaluate(_test_split(pipeline, cfg), verbose=0)
        if rt.is_chief and cfg.model_dir:
            with replacing(os.path.join(cfg.model_dir, "model.keras"), suffix=".keras") as tmp:
                local.save(tmp)
    final = dict(test_loss=float(test_loss), test_accuracy=float(test_accuracy))
    return callbacks.summary.add(
        learning_rate=rt.scale_lr(cfg.lr),
        optimizer=cfg.optimizer,
        model=cfg.model,
        mixed_precision=cfg.mixed_precision,
        keras=cfg.keras,
        pipeline=cfg.pipeline,
        train_samples=info["num_train"],  # tfdist scale: time/epoch
        steps_per_execution=count,
        final=final)


def _data_position(position: int, ctx, one_pass, pass_steps: int) -> tuple[int, int]:
    """(the pass over the data, the batches into it) of this input pipeline (`ctx`) where the run
    is `position` steps from its start. A pipeline repeats pass after pass, each in its own order
    (that of its number), and an epoch need not be a pass: --steps_per_epoch sets its steps, a
    pass over files of uneven size may hold fewer batches than the data's share, and a pipeline
    feeding several replicas gives each step one batch per replica, so a pass of an odd number of
    batches ends inside a step. `one_pass`: the pipeline's dataset of one pass, whose cardinality
    is its batches; where it is unknown, `pass_steps` steps of the data's share."""
    per_step = max(1, ctx.num_replicas_in_sync // ctx.num_input_pipelines)
    batches = int(one_pass.cardinality())
    if batches <= 0:  # unknown or infinite
        batches = pass_steps * per_step
    return divmod(position * per_step, batches)


def _auto_fixed(cfg: TrainConfig, rt, first_epoch: int, callbacks) -> Optional[str]:
    """Why --steps_per_execution=auto keeps one step a call for the whole run, or None."""
    if cfg.epochs - first_epoch < 2:
        return "one epoch to train: no later epoch to train faster"
    if callbacks.profiler is not None:  # --profile_steps or $PROFILE_STEPS
        return "the profiler (--profile_steps) traces the steps one by one"
    return None


def _agreed_count(rt, clock: StepClock, steps: int, epoch: int, epochs: int,
                  checkpoint_steps: int) -> int:
    """The steps a call for the epochs after the first, the same on every task: chosen from the
    slowest task's step time; 1 where the steps left would not pay for a second fit's start (the
    slowest task's first call)."""
    own, first = clock.step_seconds(), clock.first_call_seconds
    seconds = [own if own is not None else 0.0, first or 0.0]
    several = len(rt.engine.training_ranks()) > 1
    rows = rt.engine.gather_floats(seconds) if several else [seconds]
    slowest, switch = max(row[0] for row in rows), switch_seconds(max(row[1] for row in rows))
    if slowest <= 0.0:
        log.info("steps_per_execution auto: 1 (too few steps in epoch %d to time)", epoch + 1)
        return 1
    target = target_seconds()
    scheduled = steps_scheduled(clock.model)  # parameter_server: timed as the clock timed it
    count = choose(slowest, steps, target, checkpoint_steps,
                   PARAMETER_SERVER_LEAST if scheduled else 1)
    within = f"the epoch's {steps} steps" + (f" and of --checkpoint_steps={checkpoint_steps}"
                                             if checkpoint_steps else "")
    if scheduled:  # fewer steps a closure cost more there (auto_steps.PARAMETER_SERVER_LEAST)
        within += f", {PARAMETER_SERVER_LEAST} or more (parameter_server)"
    why = (
        f"the smallest divisor of {within} whose call takes {target * 1e3:.0f} ms or more"
        if count * slowest >= target else
        f"no divisor of {within} up to {MOST} makes a call of {target * 1e3:.0f} ms: the largest")
    median = ("the epoch's time per step and worker: steps scheduled, not timed one by one"
              if scheduled else "the slowest task's median" if several else "the median")
    timed = f"a step took {slowest * 1e3:.2f} ms in epoch {epoch + 1} ({median})"
    left = (epochs - epoch - 1) * steps
    if count > 1 and not pays(count, left, switch):
        log.info(
            "steps_per_execution auto: 1 for the rest of the run: %s; %d a call (%s) would save "
            "about %.1f s over the %d steps left, less than a second fit's start costs (%.1f s, "
            "the first call's time)", timed, count, why, saving(count, left), left, switch)
        return 1
    log.info(
        "steps_per_execution auto: %d from epoch %d on: %s, so a call takes about %.0f ms (%s)",
        count, epoch + 2, timed, count * slowest * 1e3, why)
    return count


RUN_OUTPUTS = ("checkpoints", "logs", "metrics.json", "model.keras", "progress")


def _start_anew(rt, model_dir: str) -> None:
    """--restart: the chief removes the previous run's outputs before any task looks at them."""
    if rt.is_chief:
        for name in RUN_OUTPUTS:
            path = os.path.join(model_dir, name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)
        log.info("--restart: removed the previous run's %s from %s", ", ".join(RUN_OUTPUTS),
                 model_dir)
    rt.barrier()
