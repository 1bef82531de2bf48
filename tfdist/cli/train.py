"""tfdist train: train a named model on a named input pipeline under any strategy.

The chief writes MODEL_DIR/metrics.json (strategy, replicas, batch, samples/s, final loss and
accuracy, test loss and accuracy) and MODEL_DIR/model.keras. Examples:
  tfdist train --pipeline=digits --epochs=5                       # one process
  tfdist launch -n 2 -- tfdist train --strategy=multi_worker --model_dir=runs/digits
  srun tfdist train --strategy=horovod ...                        # in a Slurm batch job
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

from absl import flags

from tfdist.cli import flags as tfdist_flags
from tfdist.cli.command import run_command

FLAGS = flags.FLAGS

tfdist_flags.define_flags()
flags.DEFINE_string(
    "model", "cnn", "Model: cnn (digits CNN), mlp, resnet_small, resnet50 "
    "(Keras applications, random weights).")
flags.DEFINE_string(
    "pipeline", "digits", "Input pipeline: a bundled recipe name (digits, "
    "image_folder, hdf5, tfds, synthetic) or the path of your own .py file.")
flags.DEFINE_multi_string(
    "pipeline_option", [], "An option of the pipeline recipe, key=value; repeat the flag for "
    "several (e.g. --pipeline=tfds --pipeline_option=name=mnist, --pipeline=image_folder "
    "--pipeline_option=source=/data/images). Checked against the recipe's info()/dataset() "
    "keywords.")
flags.DEFINE_string(
    "data_dir", None, "Where the pipeline reads or caches its data "
    "(default: the recipe's own, under ~/.cache/tfdist).")
flags.DEFINE_integer("epochs", 10, "Number of epochs.", lower_bound=1)
flags.DEFINE_integer("steps_per_epoch",
                     0, "Steps per epoch (0: one pass over the training "
                     "split at the global batch size).",
                     lower_bound=0)
flags.DEFINE_float("lr", 0.05, "Single-replica learning rate; scaled by --lr_scaling.")
flags.DEFINE_float("warmup_epochs",
                   0.0, "Ramp the learning rate linearly from --lr to the "
                   "scaled rate over this many epochs (Goyal et al., 2017).",
                   lower_bound=0)
flags.DEFINE_enum(
    "lr_schedule", "constant", ["constant", "cosine", "step"],
    "After warmup: keep the rate, cosine-decay it to 0 by the last epoch, or "
    "multiply it by --lr_decay_rate every --lr_decay_epochs.")
flags.DEFINE_float("lr_decay_epochs", 0.0, "step schedule: epochs between decays.", lower_bound=0)
flags.DEFINE_float("lr_decay_rate", 0.1, "step schedule: factor per decay.", lower_bound=0)
flags.DEFINE_enum("mixed_precision", "float32", ["float32", "mixed_float16", "mixed_bfloat16"],
                  "Keras mixed-precision policy (mixed_float16 adds dynamic loss scaling).")
flags.DEFINE_integer("checkpoint_steps",
                     0, "Also checkpoint every this many steps (0: only at "
                     "each epoch end). Checkpoints go to MODEL_DIR/checkpoints.",
                     lower_bound=0)
flags.DEFINE_bool(
    "requeue", False, "On SIGTERM/SIGUSR1 under Slurm: checkpoint, then "
    "`scontrol requeue` the job (rank 0, once) so it resumes when it runs again. "
    "Without it a preempted run exits with status 75 and resumes when re-run.")
flags.DEFINE_bool(
    "restart", False, "Train anew in --model_dir: remove the previous run's checkpoints, logs, "
    "metrics.json and model first. Without it a run that stopped resumes, and one that finished "
    "(its checkpoint has --epochs epochs) only reports its kept results.")
flags.DEFINE_bool("tensorboard", True, "Write TensorBoard logs to MODEL_DIR/logs (chief only).")
flags.DEFINE_enum("optimizer", "sgd", ["sgd", "adam"], "Optimizer (sgd has momentum 0.9).")
flags.DEFINE_string(
    "model_dir", None, "Run directory for metrics.json and the trained model "
    "(written by the chief only).")
flags.DEFINE_integer("seed", 0, "Seed of weights and data order (the same on every task).")
flags.DEFINE_bool("shuffle", True, "Shuffle the training data (a new order each epoch).")


def config_from_flags():
    """TrainConfig from the parsed flags: every field has the flag of the same name."""
    from tfdist.data.pipeline import parse_option_pairs
    from tfdist.train.fit import TrainConfig

    names = [
        f.name for f in dataclasses.fields(TrainConfig)
        if f.name not in ("engine_options", "verbose", "pipeline_options")
    ]
    return TrainConfig(**{name: FLAGS[name].value
                          for name in names},
                       engine_options=tfdist_flags.engine_options_from_flags(),
                       pipeline_options=parse_option_pairs(FLAGS.pipeline_option))


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        print(f"tfdist train: unexpected arguments {argv[1:]}; flags are --name=value.",
              file=sys.stderr)
        sys.exit(2)
    import tfdist  # noqa: F401  (selects tf-keras before TensorFlow loads)
    from tfdist.cluster import ClusterError
    from tfdist.distribute import LostTaskError
    from tfdist.distribute.devices import DeviceSetupError
    from tfdist.keras_check import KerasVersionError
    from tfdist.train.fit import Preempted, train

    try:
        metrics = train(config_from_flags())
    except (ClusterError, DeviceSetupError, KerasVersionError, ValueError) as e:
        print(f"tfdist train: error: {e}", file=sys.stderr)
        sys.exit(2)
    except Preempted as e:
        print(f"tfdist train: {e}", file=sys.stderr, flush=True)
        sys.exit(Preempted.exit_status)
    except LostTaskError as e:
        print(f"tfdist train: error: {e}", file=sys.stderr, flush=True)
        os._exit(1)  # skip interpreter teardown: threads of a broken collective can hang it
    if metrics is not None and metrics.get("role") == "evaluator":
        evaluations = metrics["evaluations"]
        last = evaluations[-1] if evaluations else None
        print(f"tfdist train: evaluator: {len(evaluations)} checkpoint(s) evaluated" +
              (f"; the last, {os.path.basename(last['checkpoint'])}: test accuracy "
               f"{last['metrics']['accuracy']:.4f}" if last else ""),
              flush=True)
        print("tfdist train: evaluations " + json.dumps(evaluations), flush=True)
    elif metrics is not None and metrics["rank"] == 0:
        final = metrics["final"]
        done = metrics.get("already_finished")
        if done:
            print(
                f"tfdist train: {FLAGS.model_dir} already finished: its checkpoint "
                f"{os.path.basename(done['checkpoint'])} has {done['epochs_done']} epochs "
                f"(--epochs={done['epochs']}); nothing trained, its metrics.json is kept. Give a "
                "larger --epochs to train on, or --restart to train anew. Its results:",
                flush=True)
        print(
            f"tfdist train: {metrics['strategy']} x{metrics['num_replicas']} replicas: "
            f"test accuracy {final['test_accuracy']:.4f}, test loss {final['test_loss']:.4f}, "
            f"{metrics['samples_per_sec']:.0f} samples/s",
            flush=True)
        print("tfdist train: metrics " + json.dumps(metrics), flush=True)


def run(argv: list[str]) -> None:
    run_command(main, argv, sys.modules[__name__], tfdist_flags)
