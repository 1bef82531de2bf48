"""`tfdist scale`: the same training at several sizes, each in processes of its own, one after
the other: an `srun` step per size inside a Slurm allocation, `tfdist launch` on one machine.

Each size trains one warm-up epoch of `steps` steps, then `timed_epochs` epochs of `steps` steps;
the rates are what `tfdist train` itself measures (tfdist.train.throughput: samples/s and the
input-wait share of the epochs after the first), read back from the size's metrics.json. A size
that fails is recorded with its exit status and log, and the study goes on.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Optional

from tfdist import env_vars
from tfdist.cluster.errors import ClusterError
from tfdist.errors import ConfigError
from tfdist.runtime import scale_lr
from tfdist.study.layout import Allocation, Step, plan_steps, srun_command

SCALINGS = ("weak", "strong")


@dataclasses.dataclass
class ScaleConfig:
    strategy: str
    sizes: list[int]
    output: str
    scaling: str = "weak"  # weak: per-replica batch fixed; strong: global batch fixed
    steps: int = 50  # steps per epoch: one warm-up epoch, then `timed_epochs` timed ones
    timed_epochs: int = 3
    batch_size: int = 32  # per replica (strong: at the smallest size)
    global_batch_size: Optional[int] = None  # strong: default batch_size x smallest size
    lr: float = 0.05  # single-replica rate, as for tfdist train
    lr_scaling: str = "linear"
    num_ps: int = 1
    train_args: list[str] = dataclasses.field(default_factory=list)  # more tfdist train flags
    command: list[str] = dataclasses.field(default_factory=list)  # instead of tfdist train
    tasks_per_node: Optional[int] = None  # default: the allocation's
    epoch_samples: Optional[int] = None  # default: metrics.json's train_samples
    timeout: float = 0.0  # seconds per size (0: none)


@dataclasses.dataclass
class SizeRun:
    """What one size needs: its batch, learning rate and the command that trains it."""

    size: int
    step: Optional[Step]
    batch_size: int  # per replica
    global_batch_size: int
    lr: float  # the rate this size trains with (after scaling)
    run_dir: str
    command: list[str]
    env: dict[str, str]
    problem: Optional[str] = None  # why it cannot run (then nothing is started)


def replicas_for(strategy: str, size: int) -> int:
    """Replicas in sync: one per worker task; parameter_server steps each worker on its own."""
    return 1 if strategy == "parameter_server" else size


def check_config(cfg: ScaleConfig) -> None:
    if cfg.scaling not in SCALINGS:
        raise ConfigError(f"--scaling={cfg.scaling!r}: expected weak or strong.")
    if not cfg.sizes or any(s < 1 for s in cfg.sizes):
        raise ConfigError(f"--sizes={','.join(map(str, cfg.sizes))}: give positive task counts, "
                          "e.g. --sizes=1,2,4.")
    if len(set(cfg.sizes)) != len(cfg.sizes):
        raise ConfigError(f"--sizes={','.join(map(str, cfg.sizes))} repeats a size.")
    if cfg.strategy in ("mirrored", "central_storage", "one_device"):
        raise ConfigError(f"--strategy={cfg.strategy} runs in one task, but tfdist scale varies "
                          "the number of tasks: use multi_worker or horovod with one task per "
                          "GPU (or per CPU node).")
    if cfg.scaling == "strong" and cfg.strategy == "parameter_server":
        raise ConfigError("--scaling=strong does not apply to --strategy=parameter_server: each "
                          "asynchronous step is one worker's batch. Use --scaling=weak.")
    if cfg.scaling == "strong":
        total = cfg.global_batch_size or cfg.batch_size * min(cfg.sizes)
        bad = [s for s in cfg.sizes if total % replicas_for(cfg.strategy, s)]
        if bad:
            raise ConfigError(f"--scaling=strong keeps the global batch at {total}, which does not "
                              f"split evenly over {', '.join(map(str, bad))} replicas: choose "
                              "--global_batch_size (or --batch_size) divisible by every size.")
    if cfg.global_batch_size and cfg.scaling != "strong":
        raise ConfigError("--global_batch_size applies to --scaling=strong; weak scaling keeps "
                          "--batch_size per replica.")


def plan_runs(cfg: ScaleConfig,
              allocation: Optional[Allocation],
              python: str = sys.executable) -> list[SizeRun]:
    """One SizeRun per size, in the order given; sizes that cannot run carry their problem."""
    check_config(cfg)
    steps = plan_steps(cfg.strategy, cfg.sizes, allocation, cfg.tasks_per_node, cfg.num_ps)
    base_replicas = replicas_for(cfg.strategy, min(cfg.sizes))
    strong_total = cfg.global_batch_size or cfg.batch_size * base_replicas
    runs = []
    for size, step in zip(cfg.sizes, steps):
        replicas = replicas_for(cfg.strategy, size)
        if cfg.scaling == "weak":
            batch, lr, rule = cfg.batch_size, cfg.lr, cfg.lr_scaling
            effective_lr = scale_lr(cfg.lr, replicas, cfg.lr_scaling)
        else:
            # The global batch stays, and so does its rate (--lr is for one replica's --batch_size),
            # given to tfdist train as it is.
            batch = strong_total // replicas
            lr = effective_lr = scale_lr(cfg.lr, strong_total / cfg.batch_size, cfg.lr_scaling)
            rule = "none"
        run_dir = os.path.join(os.path.abspath(cfg.output), f"size-{size}")
        # The placeholders a user's COMMAND may contain, with this size's values.
        values = {
            "{run_dir}": run_dir,
            "{batch_size}": str(batch),
            "{lr}": repr(lr),
            "{lr_scaling}": rule,
            "{steps}": str(cfg.steps),
            "{epochs}": str(1 + cfg.timed_epochs),
        }
        if cfg.command:
            command = [_substitute(arg, values) for arg in cfg.command]
        else:
            command = [
                python, "-u", "-m", "tfdist.cli.main", "train", f"--strategy={cfg.strategy}",
                f"--model_dir={run_dir}", f"--epochs={1 + cfg.timed_epochs}",
                f"--steps_per_epoch={cfg.steps}", f"--batch_size={batch}", f"--lr={lr!r}",
                f"--lr_scaling={rule}", "--notensorboard"
            ]
            if cfg.strategy == "parameter_server":
                command.append(f"--num_ps={cfg.num_ps}")
            command += cfg.train_args
        env = {
            "PYTHONUNBUFFERED": "1",
            "MODEL_DIR": run_dir,
            env_vars.SCALE_SIZE.name: str(size),
            env_vars.SCALE_RUN_DIR.name: run_dir,
            env_vars.SCALE_BATCH_SIZE.name: str(batch),
            env_vars.SCALE_LR.name: repr(lr),
            env_vars.SCALE_LR_SCALING.name: rule,
            env_vars.SCALE_STEPS.name: str(cfg.steps),
            env_vars.SCALE_EPOCHS.name: str(1 + cfg.timed_epochs),
        }
        if isinstance(step, str):
            runs.append(
                SizeRun(size, None, batch, batch * replicas, effective_lr, run_dir, [], env, step))
            continue
        if allocation is not None:
            launcher = srun_command(step, allocation)
        else:
            launcher = [
                python, "-m", "tfdist.cli.main", "launch", f"--nproc={step.tasks}",
                f"--strategy={cfg.strategy}", "--"
            ]
        runs.append(
            SizeRun(size, step, batch, batch * replicas, effective_lr, run_dir, launcher + command,
                    env))
    return runs


def _substitute(arg: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        arg = arg.replace(key, value)
    return arg


def run_size(run: SizeRun, log_path: str, timeout: float = 0.0) -> tuple[int, float, str]:
    """Run one size with its output in `log_path`; (exit status, seconds, how it ended)."""
    os.makedirs(run.run_dir, exist_ok=True)
    start = time.monotonic()
    with open(log_path, "ab") as log:
        log.write(f"$ {' '.join(run.command)}\n".encode())
        log.flush()
        proc = subprocess.Popen(run.command,
                                env=dict(os.environ, **run.env),
                                stdout=log,
                                stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            status = proc.wait(timeout=timeout or None)
            how = f"exit status {status}" if status >= 0 else \
                f"killed by {signal.Signals(-status).name}"
        except subprocess.TimeoutExpired:
            _stop(proc)
            status, how = 124, f"did not finish within --timeout={timeout:g} s; stopped"
        except BaseException:  # Ctrl-C or SIGTERM of the study: the size's processes go too
            _stop(proc)
            raise
    return status, time.monotonic() - start, how


def _stop(proc: subprocess.Popen, grace: float = 30.0) -> None:
    """SIGTERM to the size's process group (srun then ends its step), SIGKILL after `grace`."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            pass


def read_metrics(run_dir: str) -> Optional[dict[str, Any]]:
    path = os.path.join(run_dir, "metrics.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def measured(run: SizeRun, metrics: Optional[dict[str, Any]],
             epoch_samples: Optional[int]) -> dict[str, Any]:
    """The size's row from its metrics.json (what tfdist train measured), or why there is none."""
    if metrics is None or not metrics.get("samples_per_sec"):
        return {
            "error":
            f"no samples_per_sec in {os.path.join(run.run_dir, 'metrics.json')} (a COMMAND must "
            "write it there: its run directory is {run_dir} or $TFDIST_SCALE_RUN_DIR)"
        }
    timed = list(metrics.get("epoch_samples_per_sec") or [])[1:]
    samples = epoch_samples or metrics.get("train_samples")
    rate = float(metrics["samples_per_sec"])
    return {
        "samples_per_sec": rate,
        "epoch_samples_per_sec": timed,
        "input_wait": metrics.get("input_wait"),
        "global_batch_size": metrics.get("global_batch_size", run.global_batch_size),
        "learning_rate": metrics.get("learning_rate", run.lr),
        "num_replicas": metrics.get("num_replicas"),
        "world_size": metrics.get("world_size"),
        "epoch_samples": samples,
        "time_per_epoch": samples / rate if samples else None,
    }


def run_study(cfg: ScaleConfig,
              allocation: Optional[Allocation],
              say: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every size; returns the study (what scale.json holds), speed-ups and efficiencies
    included (tfdist.study.report.add_scaling)."""
    from tfdist.study.report import add_scaling

    if os.path.exists(os.path.join(cfg.output, "scale.json")):
        raise ClusterError(f"{cfg.output} already holds a scale.json: give another --output (each "
                           "size would resume from the old checkpoints there).")
    runs = plan_runs(cfg, allocation)
    for run in runs:
        if os.path.exists(run.run_dir):
            raise ClusterError(f"{run.run_dir} already exists (an earlier study's run: tfdist "
                               "train would resume from its checkpoints): give another --output, "
                               "or remove it.")
    os.makedirs(cfg.output, exist_ok=True)
    where = (f"Slurm job {allocation.job_id}: {allocation.nodes} node(s) x "
             f"{cfg.tasks_per_node or allocation.tasks_per_node} task(s)"
             if allocation else "this machine (tfdist launch)")
    say(f"tfdist scale: {cfg.scaling} scaling, --strategy={cfg.strategy}, sizes "
        f"{','.join(map(str, cfg.sizes))} on {where}; {cfg.steps} warm-up steps, then "
        f"{cfg.timed_epochs} x {cfg.steps} timed steps per size")
    results = []
    for run in runs:
        row: dict[str, Any] = {
            "size": run.size,
            "layout": run.step.layout if run.step else None,
            "tasks": run.step.tasks if run.step else None,
            "nodes": run.step.nodes if run.step else None,
            "per_replica_batch_size": run.batch_size,
            "global_batch_size": run.global_batch_size,
            "learning_rate": run.lr,
            "run_dir": run.run_dir,
            "command": run.command,
        }
        if run.problem:
            say(f"tfdist scale: size {run.size}: skipped: {run.problem}")
            row.update(status=None, error=run.problem)
            results.append(row)
            continue
        log_path = os.path.join(cfg.output, f"size-{run.size}.log")
        say(f"tfdist scale: size {run.size} ({run.step.layout} = nodes x tasks), log "
            f"{log_path}: {' '.join(run.command)}")
        status, seconds, how = run_size(run, log_path, cfg.timeout)
        row.update(status=status, wall_seconds=round(seconds, 2), log=log_path)
        if status == 0:
            row.update(measured(run, read_metrics(run.run_dir), cfg.epoch_samples))
        else:
            row["error"] = f"{how} (log: {log_path})"
        if row.get("error"):
            say(f"tfdist scale: size {run.size} FAILED: {row['error']}; last lines:\n" +
                _tail(log_path))
        else:
            wait = row["input_wait"]
            say(f"tfdist scale: size {run.size}: {row['samples_per_sec']:.0f} samples/s" +
                (f", input wait {wait:.1%}" if wait is not None else "") + f" ({seconds:.0f} s)")
        results.append(row)
    study = {
        "strategy": cfg.strategy,
        "scaling": cfg.scaling,
        "sizes": cfg.sizes,
        "steps_per_epoch": cfg.steps,
        "warmup_steps": cfg.steps,
        "timed_steps": cfg.steps * cfg.timed_epochs,
        "launcher": "srun" if allocation else "tfdist launch",
        "slurm_job_id": allocation.job_id if allocation else None,
        "train_args": cfg.train_args,
        "command": cfg.command or None,
        "results": results,
    }
    add_scaling(study)
    return study


def _tail(path: str, lines: int = 15) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join("    " + line for line in f.readlines()[-lines:]).rstrip()
    except OSError as e:
        return f"    ({e})"
