"""tfdist train: train a named model on a named input pipeline under any strategy.

The chief writes MODEL_DIR/metrics.json (strategy, replicas, batch, samples/s, final loss and
accuracy, test loss and accuracy) and MODEL_DIR/model.keras. Examples:
  tfdist train --pipeline=digits --epochs=5                       # one process
  tfdist launch -n 2 -- tfdist train --strategy=multi_worker --model_dir=runs/digits
  srun tfdist train --strategy=horovod ...                        # in a Slurm batch job
"""

from __future__ import annotations

import json
import os
import sys

from absl import flags

from tfdist import logs
from tfdist.cli import flags as tfdist_flags
from tfdist.cli.command import run_command
from tfdist.tf_environ import LEGACY_KERAS, legacy_keras
from tfdist.app.config import DEFAULTS as D
from tfdist.app.config import (KERASES, MIXED_PRECISION, OPTIMIZERS, SCHEDULES, TrainConfig,
                               default_keras)

FLAGS = flags.FLAGS

tfdist_flags.define_flags()
flags.DEFINE_string(
    "model", D.model, "Model: cnn (digits CNN), mlp, resnet_small, resnet50 "
    "(Keras applications, random weights).")
flags.DEFINE_enum(
    "keras", None, [str(k) for k in KERASES],
    "The Keras that builds the model and optimizer: 2 is tf-keras, 3 is Keras 3. Default: the "
    "one tf.keras is, as TensorFlow decides: 3, or 2 where TF_USE_LEGACY_KERAS=1 is exported "
    "(--keras=2 sets it for this run). Both train under every --strategy.")
flags.register_multi_flags_validator(
    ["keras", "backward_passes_per_step"],
    lambda v: (v["keras"] or str(default_keras())) != "3" or v["backward_passes_per_step"] == 1,
    message="--backward_passes_per_step > 1 with --keras=3: Horovod accumulates gradients in "
    "Keras 2 optimizer hooks that Keras 3 does not call. Use --keras=2, or in your own script "
    "Keras 3's own accumulation (optimizer(..., gradient_accumulation_steps=N)).")
flags.DEFINE_string(
    "pipeline", D.pipeline, "Input pipeline: a bundled recipe name (digits, "
    "image_folder, hdf5, tfds, synthetic) or the path of your own .py file.")
flags.DEFINE_multi_string(
    "pipeline_option", [], "An option of the pipeline recipe, key=value; repeat the flag for "
    "several (e.g. --pipeline=tfds --pipeline_option=name=mnist, --pipeline=image_folder "
    "--pipeline_option=source=/data/images). Checked against the recipe's info()/dataset() "
    "keywords.")
flags.DEFINE_string(
    "data_dir", D.data_dir, "Where the pipeline reads or caches its data "
    "(default: the recipe's own, under ~/.cache/tfdist).")
flags.DEFINE_integer("epochs",
                     None, "Number of epochs. Default: 10; parameter_server 20 (stale asynchronous "
                     "updates learn slower).",
                     lower_bound=1)
flags.DEFINE_integer("steps_per_epoch",
                     D.steps_per_epoch, "Steps per epoch (0: one pass over the training "
                     "split at the global batch size).",
                     lower_bound=0)
flags.DEFINE_float(
    "lr", None, "Single-replica learning rate; scaled by --lr_scaling. Default: 0.05 (sgd); "
    "parameter_server 0.001 (adam).")
flags.DEFINE_float("warmup_epochs",
                   D.warmup_epochs, "Ramp the learning rate linearly from --lr to the "
                   "scaled rate over this many epochs (Goyal et al., 2017).",
                   lower_bound=0)
flags.DEFINE_enum(
    "lr_schedule", D.lr_schedule, list(SCHEDULES),
    "After warmup: keep the rate, cosine-decay it to 0 by the last epoch, or "
    "multiply it by --lr_decay_rate every --lr_decay_epochs.")
flags.DEFINE_float("lr_decay_epochs",
                   D.lr_decay_epochs,
                   "step schedule: epochs between decays.",
                   lower_bound=0)
flags.DEFINE_float("lr_decay_rate",
                   D.lr_decay_rate,
                   "step schedule: factor per decay.",
                   lower_bound=0)
flags.DEFINE_enum("mixed_precision", D.mixed_precision, list(MIXED_PRECISION),
                  "Keras mixed-precision policy (mixed_float16 adds dynamic loss scaling).")
flags.DEFINE_string(
    "steps_per_execution", str(D.steps_per_execution),
    "Training steps in one call of Keras's step function (its compile option): less per-step "
    "overhead for small models. Checkpoints, preemption and resume stay exact; Keras 3 with "
    "--model_dir needs it to divide the steps of an epoch (--steps_per_epoch). 'auto' (the "
    "default): the first epoch trains at 1 and times its steps, the others at the smallest "
    "divisor of the epoch's steps (and of --checkpoint_steps) whose call takes 50 ms or more, "
    "so a step of 50 ms or more stays at 1. The switch re-traces the step function (about the "
    "run's first call): it is made only where the steps left save more (0.3 ms a call saved), "
    "so a short run stays at 1; 1 also under parameter_server, with --profile_steps, and for a "
    "run of one epoch. The log says which and why; metrics.json records the count.")
flags.DEFINE_integer("checkpoint_steps",
                     D.checkpoint_steps, "Also checkpoint every this many steps (0: only at "
                     "each epoch end). Checkpoints go to MODEL_DIR/checkpoints.",
                     lower_bound=0)
flags.DEFINE_bool(
    "requeue", D.requeue, "On SIGTERM/SIGUSR1 under Slurm: checkpoint, then "
    "`scontrol requeue` the job (rank 0, once) so it resumes when it runs again. "
    "Default: off, unless $TFDIST_REQUEUE=1 (the jobs/ scripts export it). Without it a "
    "preempted run exits with status 75 and resumes when re-run. Also after a hang or a lost "
    "task (the watchdog, --watchdog_timeout), at most $TFDIST_MAX_RESTARTS times (default 2) a "
    "job.")
flags.DEFINE_bool(
    "restart", D.restart, "Train anew in --model_dir: remove the previous run's checkpoints, "
    "logs, metrics.json and model first. Without it a run that stopped resumes, and one that "
    "finished (its checkpoint has --epochs epochs) only reports its kept results.")
flags.DEFINE_string(
    "watchdog_timeout", D.watchdog_timeout, "Seconds without a completed training step before "
    "the job ends: every rank dumps its threads' stacks to its log, the chief names the rank(s) "
    "that stopped progressing, the processes exit with status 124 (with --requeue: the job is "
    "requeued, at most $TFDIST_MAX_RESTARTS times, default 2). 'auto' (default: "
    "$TFDIST_WATCHDOG_TIMEOUT, else 50 step times and at least 300 s; the first step, epoch ends "
    "and checkpoint writes get max(600 s, 3x)), seconds, or 0/'off'.")
flags.register_validator("watchdog_timeout",
                         lambda v: v is None or _watchdog_ok(v),
                         message="--watchdog_timeout: expected seconds (>= 0), 'auto' or 'off'.")
flags.DEFINE_string(
    "profile_steps", D.profile_steps, "A:B: every rank traces training steps A to B (counted "
    "from 1 over the run; from 2: step 1 builds the step function) with TensorFlow's profiler "
    "into MODEL_DIR/profile/<rank>/, and the chief writes MODEL_DIR/profile/summary.json and "
    "one line naming the slowest rank and where its step time goes (docs: profiling.md). "
    "Default: $PROFILE_STEPS, else off. Not under parameter_server.")
flags.register_validator("profile_steps",
                         lambda v: _profile_ok("parse_steps", "--profile_steps", v),
                         message="--profile_steps: expected A:B (see the error above).")
flags.DEFINE_string(
    "profile_ranks", D.profile_ranks, "With --profile_steps: the ranks that trace, e.g. 0,3. "
    "Default: $PROFILE_RANKS, else all.")
flags.register_validator("profile_ranks",
                         lambda v: _profile_ok("parse_ranks", "--profile_ranks", v),
                         message="--profile_ranks: expected 'all' or ranks such as 0,3.")
flags.DEFINE_bool("tensorboard", D.tensorboard,
                  "Write TensorBoard logs to MODEL_DIR/logs (chief only).")
flags.DEFINE_bool(
    "meter", D.meter, "Count samples and time the wait for input inside each training step "
    "(samples/s and input_wait in the epoch lines and metrics.json). --nometer leaves the step "
    "as Keras builds it (bench/ measures what the meter costs).")
flags.DEFINE_bool(
    "preemption", D.preemption, "With --model_dir: on SIGTERM/SIGUSR1 every task stops after an "
    "agreed step, checkpoints and exits 75 (the tasks agree about once a second). "
    "--nopreemption: a signal ends the process as it would without tfdist.")
flags.DEFINE_enum(
    "optimizer", None, list(OPTIMIZERS), "Optimizer (sgd has momentum 0.9). Default: sgd; "
    "parameter_server adam (SGD's stale asynchronous updates learned digits to 0.95-0.99 from run "
    "to run, Adam at 0.001 >= 0.97).")
flags.DEFINE_string(
    "model_dir", D.model_dir, "Run directory for checkpoints, metrics.json and the trained "
    "model (written by the chief only).")
flags.DEFINE_integer("seed", D.seed, "Seed of weights and data order (the same on every task).")
flags.DEFINE_bool("shuffle", D.shuffle, "Shuffle the training data (a new order each epoch).")


def _watchdog_ok(value: str) -> bool:
    from tfdist.errors import ConfigError
    from tfdist.train.watchdog import timeout_setting

    try:
        timeout_setting(value)
    except ConfigError:
        return False
    return True


def _profile_ok(parser: str, flag: str, value) -> bool:
    """Whether `value` parses; raises the parser's ConfigError as a flags error naming the value
    and the form expected."""
    from tfdist.errors import ConfigError
    from tfdist.train import profile_options

    try:
        getattr(profile_options, parser)(value, flag)
    except ConfigError as e:
        raise flags.ValidationError(str(e)) from None
    return True


def config_from_flags() -> TrainConfig:
    """TrainConfig from the parsed flags, field by field (a renamed field fails here and in
    tests/cli/test_train_flags.py, never silently)."""
    from pipelines import parse_option_pairs

    f = FLAGS
    return TrainConfig(model=f.model,
                       keras=int(f.keras) if f.keras else None,
                       pipeline=f.pipeline,
                       strategy=f.strategy,
                       num_ps=f.num_ps,
                       evaluator=f.evaluator,
                       port=f.port,
                       epochs=f.epochs,
                       batch_size=f.batch_size,
                       lr=f.lr,
                       lr_scaling=f.lr_scaling,
                       warmup_epochs=f.warmup_epochs,
                       lr_schedule=f.lr_schedule,
                       lr_decay_epochs=f.lr_decay_epochs,
                       lr_decay_rate=f.lr_decay_rate,
                       optimizer=f.optimizer,
                       mixed_precision=f.mixed_precision,
                       task_gpus=f.task_gpus,
                       gpu_memory_growth=f.gpu_memory_growth,
                       model_dir=f.model_dir,
                       checkpoint_steps=f.checkpoint_steps,
                       requeue=f.requeue,
                       restart=f.restart,
                       watchdog_timeout=f.watchdog_timeout,
                       tensorboard=f.tensorboard,
                       profile_steps=f.profile_steps,
                       profile_ranks=f.profile_ranks,
                       meter=f.meter,
                       preemption=f.preemption,
                       seed=f.seed,
                       shuffle=f.shuffle,
                       steps_per_epoch=f.steps_per_epoch,
                       steps_per_execution=f.steps_per_execution,
                       data_dir=f.data_dir,
                       pipeline_options=parse_option_pairs(f.pipeline_option),
                       engine_options=tfdist_flags.engine_options_from_flags())


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        print(f"tfdist train: unexpected arguments {argv[1:]}; flags are --name=value.",
              file=sys.stderr)
        sys.exit(2)
    logs.filter_stderr()  # before TensorFlow loads
    config = config_from_flags()
    if config.keras == 2 and not legacy_keras():
        # --keras=2 asked for tf-keras: tf.keras is tf-keras in this run (Horovod's Keras API
        # binds it), as TensorFlow makes it under the switch a tf-keras user exports.
        os.environ[LEGACY_KERAS] = "1"
    from tfdist.app.fit import train

    metrics = train(config)
    if metrics is not None and metrics.get("role") == "evaluator":
        evaluations = metrics["evaluations"]
        last = evaluations[-1] if evaluations else None
        print(f"tfdist train: evaluator: {len(evaluations)} checkpoint(s) evaluated" +
              (f"; the last, {os.path.basename(last['checkpoint'])}: test accuracy "
               f"{last['metrics']['accuracy']:.4f}" if last else ""),
              flush=True)
        print("tfdist train: evaluations " + json.dumps(evaluations), flush=True)
    elif metrics is not None and metrics["rank"] == 0:
        final, rate, done = metrics["final"], metrics.get("samples_per_sec"), metrics.get(
            "already_finished")
        if done:
            print(
                f"tfdist train: {FLAGS.model_dir} already finished: its checkpoint "
                f"{os.path.basename(done['checkpoint'])} has {done['epochs_done']} epochs "
                f"(--epochs={done['epochs']}); nothing trained, its metrics.json is kept. Give a "
                "larger --epochs to train on, or --restart to train anew. Its results:",
                flush=True)
        print(f"tfdist train: {metrics['strategy']} x{metrics['num_replicas']} replicas: test "
              f"accuracy {final['test_accuracy']:.4f}, test loss {final['test_loss']:.4f}" +
              (f", {rate:.0f} samples/s" if rate else ""),
              flush=True)
        if not FLAGS.model_dir:  # else they are in MODEL_DIR/metrics.json
            print("tfdist train: metrics " + json.dumps(metrics), flush=True)
    # Done, all written: leave without the interpreter's teardown, where TensorFlow's gRPC
    # threads can hold a task long enough to log errors about the chief that has gone.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run(argv: list[str]) -> None:
    run_command(main, argv, sys.modules[__name__], tfdist_flags)
