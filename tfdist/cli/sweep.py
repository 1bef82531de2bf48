"""tfdist sweep: many trainings that differ in a few settings, as one Slurm job array.

  tfdist sweep DIR --grid='lr=0.01,0.1;batch_size=32,64' [--job=multi_worker] -- --epochs=30
  tfdist sweep DIR --settings_file=settings.txt --sbatch='--nodes=2 --time=4:00:00'
      -- python my_train.py --epochs=30      (one command line)
  tfdist sweep status DIR [--sort=test_accuracy] [--plot] [--wait]
  tfdist sweep resubmit DIR [--failed]

Every element is a job of jobs/JOB.sbatch (any strategy, as many nodes as --sbatch asks) with its
settings added as flags: to `tfdist train` (flags after `--` that start with `-`), or to your own
command (after `--`). Its MODEL_DIR is DIR/runs/<its settings>, e.g. DIR/runs/lr=0.1,batch_size=32,
its log DIR/logs/<array job>_<task>.out. DIR/sweep.json (written before anything is submitted)
maps each element's index to its settings. Running the same command again resumes the sweep:
finished elements are left alone, the others resume from their checkpoints. Preempted or at its
time limit, an element checkpoints and requeues itself (not the array). More elements than the
cluster's MaxArraySize are split into several arrays.

status prints one line per element (settings, state, requeues, epochs, final metrics) and, with
--plot, draws DIR/sweep.png (the metric against each setting). resubmit submits the elements that
failed, stopped or were cancelled (and those never submitted, unless --failed). No command waits
for the array unless --wait: then it prints a line whenever the counts change.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

from absl import flags

from tfdist import env_vars
from tfdist.cli.command import run_command
from tfdist.errors import ConfigError

FLAGS = flags.FLAGS
JOBS = ("multi_worker", "horovod", "parameter_server", "mirrored")

_GRID = flags.DEFINE_string(
    "grid", None, "Every combination of these settings: NAME=V1,V2;NAME=V1,V2 (flags of tfdist "
    "train or of your command, without the dashes).")
_SETTINGS_FILE = flags.DEFINE_string(
    "settings_file", None,
    "Instead of --grid: one element per line, e.g. `--lr=0.1 --batch_size=32`.")
_JOB = flags.DEFINE_enum("job", "multi_worker", JOBS,
                         "The batch script each element runs: jobs/JOB.sbatch.")
_SBATCH = flags.DEFINE_string(
    "sbatch", "", "sbatch options for every element, e.g. '--nodes=2 --time=4:00:00 -p gpu' "
    "(the script's #SBATCH lines otherwise).")
_MAX_RUNNING = flags.DEFINE_integer("max_running",
                                    None,
                                    "At most this many elements run at once (%N).",
                                    lower_bound=1)
_WAIT = flags.DEFINE_boolean("wait", False, "Wait until no element is pending or running.")
_FAILED = flags.DEFINE_boolean(
    "failed", False, "resubmit: only the elements that failed, stopped or were cancelled.")
_SORT = flags.DEFINE_string(
    "sort", "test_accuracy", "status: sort by this final metric (best "
    "first); '' keeps the sweep's order.")
_PLOT = flags.DEFINE_boolean("plot", False, "status: draw DIR/sweep.png, --sort's metric against "
                             "each setting.")
_FORMAT = flags.DEFINE_enum("format", "table", ["table", "json"],
                            "status: a table, or one JSON object per element (for scripts).")
_POLL = flags.DEFINE_float("poll",
                           15,
                           "--wait: seconds between looks at Slurm's queue.",
                           lower_bound=0.1)


def jobs_dir() -> str:
    given = os.environ.get(env_vars.JOBS_DIR.name)
    return given or str(Path(__file__).resolve().parents[2] / "jobs")


def main(argv: list[str]) -> None:
    from tfdist.study.sweep import record, status, table

    args = argv[1:]
    action = args[0] if args and args[0] in ("status", "resubmit", "element", "submit") else None
    if action:
        args = args[1:]
    if not args:
        raise ConfigError("Give the sweep's directory: tfdist sweep DIR --grid=... (see --help).")
    directory, rest = args[0], args[1:]
    if action == "element":
        sweep = record.load(directory)
        model_dir, element_args = record.element(sweep, directory, _index(rest))
        print(shlex.join([model_dir, *element_args]))
        return
    if action == "status":
        _refuse_extra(rest, "status")
        _report(directory, final=True)
        return
    if action == "resubmit":
        _refuse_extra(rest, "resubmit")
        rows = status.status(directory)
        indices = status.unfinished(rows, failed_only=_FAILED.value)
        if not indices:
            print(f"tfdist sweep: nothing to resubmit in {directory} ({table.summary(rows)}).")
            return
        _submit(directory, record.load(directory), indices)
        return
    _start(directory, rest)


def _index(rest: list[str]) -> int:
    if len(rest) != 1 or not rest[0].isdigit():
        raise ConfigError("tfdist sweep element DIR INDEX: one element index.")
    return int(rest[0])


def _refuse_extra(rest: list[str], action: str) -> None:
    if rest:
        raise ConfigError(f"tfdist sweep {action} DIR takes no other arguments, got "
                          f"{' '.join(rest)!r}.")


def _start(directory: str, rest: list[str]) -> None:
    from tfdist.study.sweep import grid, record, status, table

    if rest and rest[0] == "--":
        rest = rest[1:]
    train_args, command = (rest, []) if rest and rest[0].startswith("-") else ([], rest)
    if _GRID.value and _SETTINGS_FILE.value:
        raise ConfigError("Give --grid or --settings_file, not both.")
    if _GRID.value:
        settings = grid.parse_grid(_GRID.value)
    elif _SETTINGS_FILE.value:
        settings = grid.parse_settings_file(_SETTINGS_FILE.value)
    else:
        raise ConfigError("What does the sweep vary? Give --grid='lr=0.01,0.1;batch_size=32,64' "
                          "or --settings_file=FILE (one line of flags per element).")
    if not command:
        _check_train_flags(settings, train_args)
    plan = record.new_sweep(settings, _JOB.value, train_args, command, shlex.split(_SBATCH.value))
    if os.path.exists(os.path.join(directory, record.SWEEP_FILE)):
        sweep = record.load(directory)
        differs = record.same_plan(sweep, plan)
        if differs:
            raise ConfigError(f"{directory} holds another sweep (its {differs} differ): "
                              "give a new directory, or the same settings to resume this one.")
        rows = status.status(directory)
        indices = status.unfinished(rows)
        print(f"tfdist sweep: {directory} exists ({table.summary(rows)}): resuming.", flush=True)
        if not indices:
            _report(directory, final=_WAIT.value)
            return
    else:
        sweep = plan
        os.makedirs(directory, exist_ok=True)
        record.save(directory, sweep)  # the index -> settings mapping, before anything runs
        indices = [e["index"] for e in sweep["elements"]]
    _submit(directory, sweep, indices)


def _check_train_flags(settings: list[dict], train_args: list[str]) -> None:
    """Every setting and flag names a flag of tfdist train: a typo fails here, not in every
    element after it waited in the queue."""
    from tfdist.cli import flags as tfdist_flags
    from tfdist.cli import train as train_cli

    known = {
        f.name
        for module in (train_cli, tfdist_flags)
        for f in FLAGS.get_key_flags_for_module(module)
    }
    known |= {f"no{name}" for name in known}
    given = {name for s in settings for name in s}
    given |= {a.lstrip("-").split("=", 1)[0] for a in train_args if a.startswith("-")}
    unknown = sorted(given - known)
    if unknown:
        raise ConfigError(f"{', '.join(unknown)}: not flag(s) of tfdist train (`tfdist train "
                          "--help` lists them). For your own script's flags, give the script "
                          "after `--`: tfdist sweep DIR --grid=... -- python my_train.py")


def _submit(directory: str, sweep: dict, indices: list[int]) -> None:
    from tfdist.study.sweep import submit

    made = submit.submit(directory, sweep, indices, jobs_dir(), _MAX_RUNNING.value)
    for s in made:
        print(
            f"tfdist sweep: submitted array {s['array_job']}: element(s) "
            f"{submit.array_spec(s['indices'])} of {len(sweep['elements'])} "
            f"(jobs/{sweep['job']}.sbatch; logs in {os.path.join(directory, 'logs')})",
            flush=True)
    print(f"tfdist sweep: `tfdist sweep status {directory}` shows how they do.", flush=True)
    if _WAIT.value:
        _report(directory, final=True)


def _report(directory: str, final: bool) -> None:
    from tfdist.study.sweep import plot, squeue, status, table

    rows = status.status(directory)
    seen = None
    while _WAIT.value and any(r["state"].upper() in squeue.ACTIVE for r in rows):
        line = table.summary(rows)
        if line != seen:
            print(f"tfdist sweep: {time.strftime('%H:%M:%S')} {line}", flush=True)
            seen = line
        time.sleep(_POLL.value)
        rows = status.status(directory)
    if _FORMAT.value == "json":
        print(json.dumps(rows, indent=1), flush=True)
    else:
        print(table.table(rows, _SORT.value or None), flush=True)
        print(f"tfdist sweep: {table.summary(rows)}", flush=True)
    if _PLOT.value and _SORT.value:
        png = os.path.join(directory, "sweep.png")
        why_not = plot.plot(rows, _SORT.value, png)
        print(f"tfdist sweep: wrote {png}" if why_not is None else f"tfdist sweep: no plot: "
              f"{why_not}",
              flush=True)
    if final and _WAIT.value and any(r["state"] in ("failed", "cancelled", "stopped")
                                     for r in rows):
        sys.exit(1)


def run(argv: list[str]) -> None:
    run_command(main, argv, sys.modules[__name__])
