"""tfdist scale: a scaling study — the same training at several sizes, each in its own processes.

Inside a Slurm allocation (run it in the batch script, not under srun; jobs/scale.sbatch does) each
size is one `srun` step of nodes x tasks per node; on one machine each size runs under
`tfdist launch`. Every size trains one warm-up epoch of --steps steps and then --timed_epochs
epochs of --steps steps; samples/s and the input-wait share are what `tfdist train` measures.
Writes OUTPUT/scale.json and OUTPUT/scale.png (throughput and efficiency against size, with the
ideal lines), one log and run directory per size, and prints the table. A failed size is reported
and the study goes on (exit status 1 at the end).

  tfdist scale --strategy=multi_worker --sizes=1,2 --model=resnet_small --output=runs/scale
  tfdist scale --strategy=horovod --sizes=1,2,4 --scaling=strong --global_batch_size=256
  tfdist scale --sizes=1,2 -- python my_train.py --model_dir={run_dir} --batch_size={batch_size}

The tfdist train flags (--model, --pipeline, --optimizer, --lr, --lr_scaling, --batch_size, ...)
go to every size's `tfdist train`. A COMMAND after `--` runs instead: it must write
{run_dir}/metrics.json with samples_per_sec (and input_wait) — e.g. from
tfdist.train.throughput.ThroughputMeter — and it gets {run_dir} {batch_size} {lr} {lr_scaling}
{steps} {epochs} replaced in its arguments and as $TFDIST_SCALE_RUN_DIR (also $MODEL_DIR),
$TFDIST_SCALE_BATCH_SIZE, $TFDIST_SCALE_LR, ...
"""

from __future__ import annotations

import os
import sys
import time

from absl import flags

from tfdist.cli import flags as tfdist_flags
from tfdist.cli import train as train_cli
from tfdist.cli.command import run_command
from tfdist.errors import ConfigError
from tfdist.app.config import given_or_default

FLAGS = flags.FLAGS

_SIZES = flags.DEFINE_list(
    "sizes", None, "Sizes to run, in tasks (one replica each; parameter_server: workers, its "
    "chief and ps added), e.g. 1,2,4. Default in a Slurm job: 1, 2, 4, ... and the whole "
    "allocation.")
_SCALING = flags.DEFINE_enum(
    "scaling", "weak", ["weak", "strong"],
    "weak: --batch_size per replica at every size (the global batch grows); strong: the global "
    "batch stays (--global_batch_size, default --batch_size x the smallest size), split over "
    "the replicas, and so does its learning rate.")
_GLOBAL_BATCH = flags.DEFINE_integer("global_batch_size",
                                     None, "--scaling=strong: the global batch every size "
                                     "shares (divisible by every size).",
                                     lower_bound=1)
_STEPS = flags.DEFINE_integer("steps",
                              50, "Steps per epoch: one warm-up epoch, then --timed_epochs "
                              "timed epochs of this many steps.",
                              lower_bound=1)
_TIMED_EPOCHS = flags.DEFINE_integer("timed_epochs",
                                     3, "Timed epochs after the warm-up epoch; "
                                     "samples/s is their mean, their range the noise.",
                                     lower_bound=1)
_OUTPUT = flags.DEFINE_string(
    "output", None, "Study directory: scale.json, scale.png, size-N.log and size-N/ (each size's "
    "run). Default: runs/scale-<Slurm job id or time>.")
_TASKS_PER_NODE = flags.DEFINE_integer(
    "tasks_per_node",
    None, "Slurm: tasks per node of each step (default: the "
    "allocation's --ntasks-per-node); a size takes ceil(size / this) nodes.",
    lower_bound=1)
_EPOCH_SAMPLES = flags.DEFINE_integer(
    "epoch_samples",
    None, "Samples in one epoch, for the time/epoch column "
    "(default: the training split's size that tfdist train writes in metrics.json).",
    lower_bound=1)
_TIMEOUT = flags.DEFINE_float("timeout",
                              0, "Seconds after which one size is stopped and counted as "
                              "failed (0: no limit).",
                              lower_bound=0)

# tfdist train flags that scale sets for every size itself.
_SET_BY_SCALE = {
    "epochs": "--timed_epochs (plus one warm-up epoch)",
    "steps_per_epoch": "--steps",
    "model_dir": "--output (each size runs in OUTPUT/size-N)",
    "evaluator": "nothing: a study times training only",
    "requeue": "nothing: a study is short; re-run it instead",
}
# Flags that scale reads (and passes on in its own way) rather than forwarding as given.
_READ_BY_SCALE = ("strategy", "num_ps", "batch_size", "lr", "lr_scaling", "tensorboard")


def train_args_from_flags() -> list[str]:
    """The tfdist train flags given on the command line, as --name=value, for every size."""
    given = []
    for module in (train_cli, tfdist_flags):
        for flag in FLAGS.get_key_flags_for_module(module):
            if not flag.present or flag.name in _READ_BY_SCALE:
                continue
            if flag.name in _SET_BY_SCALE:
                raise ConfigError(f"--{flag.name} is set by tfdist scale for every size; use "
                                  f"{_SET_BY_SCALE[flag.name]}.")
            given.append(flag.serialize())
    return given


def config_from_flags(command: list[str], allocation):
    from tfdist.study.layout import default_sizes
    from tfdist.study.scale import ScaleConfig

    strategy = "multi_worker" if FLAGS.strategy == "auto" else FLAGS.strategy
    train_args = train_args_from_flags()
    if command and train_args:
        raise ConfigError(f"{' '.join(train_args)} are flags of tfdist train, but the study runs "
                          f"your command {' '.join(command)!r} instead: put them in it.")
    try:
        sizes = [int(s) for s in _SIZES.value] if _SIZES.value else default_sizes(
            allocation, strategy, _TASKS_PER_NODE.value, FLAGS.num_ps)
    except ValueError:  # int() of a size
        raise ConfigError(f"--sizes={','.join(_SIZES.value)}: expected whole numbers, e.g. "
                          "--sizes=1,2,4.") from None
    job = allocation.job_id if allocation else time.strftime("%Y%m%d-%H%M%S")
    return ScaleConfig(strategy=strategy,
                       sizes=sizes,
                       output=_OUTPUT.value or os.path.join("runs", f"scale-{job}"),
                       scaling=_SCALING.value,
                       steps=_STEPS.value,
                       timed_epochs=_TIMED_EPOCHS.value,
                       batch_size=FLAGS.batch_size,
                       global_batch_size=_GLOBAL_BATCH.value,
                       lr=given_or_default("lr", FLAGS.lr, FLAGS.strategy),
                       lr_scaling=FLAGS.lr_scaling,
                       num_ps=FLAGS.num_ps,
                       train_args=train_args,
                       command=command,
                       tasks_per_node=_TASKS_PER_NODE.value,
                       epoch_samples=_EPOCH_SAMPLES.value,
                       timeout=_TIMEOUT.value)


def main(argv: list[str]) -> None:
    from tfdist.files import write_json
    from tfdist.study.layout import allocation_from_env
    from tfdist.study.report import plot, table
    from tfdist.study.scale import run_study

    allocation = allocation_from_env(os.environ)
    cfg = config_from_flags(argv[1:], allocation)
    study = run_study(cfg, allocation, say=lambda line: print(line, flush=True))
    model = "COMMAND" if cfg.command else FLAGS.model
    study["model"] = model
    write_json(os.path.join(cfg.output, "scale.json"), study)
    print(table(study), flush=True)
    png = os.path.join(cfg.output, "scale.png")
    title = (f"tfdist scale: {model}, {cfg.strategy}, {cfg.scaling} scaling "
             f"({study['launcher']})")
    why_not = plot(study, png, title)
    print(f"tfdist scale: wrote {os.path.join(cfg.output, 'scale.json')}" +
          (f" and {png}" if why_not is None else f"; no plot: {why_not}"),
          flush=True)
    failed = [r["size"] for r in study["results"] if not r.get("samples_per_sec")]
    if failed:
        print(f"tfdist scale: size(s) {', '.join(map(str, failed))} failed (see above).",
              file=sys.stderr)
        sys.exit(1)


def run(argv: list[str]) -> None:
    run_command(main, argv, sys.modules[__name__], train_cli, tfdist_flags)
