"""Benchmarks 1, 3 and 4: tfdist against hand-written TensorFlow and Horovod, in CPU-seconds per
trained sample, plus tfdist's own variants (Keras 3, each per-step addition on/off).

  .venv/bin/python bench/training.py [--rounds=24] [--run_pairs=4] [--max_run_pairs=8] [--quick]

Every comparison goes through bench/compare.py's `compare`: both runs start together, warm up,
then train in alternating slices of about 0.8 s (A B, B A, ...: the other run's processes
stopped), and each row is the median per-round ratio with a bootstrap 95 % interval and its
verdict:

- overhead.json (1): `tfdist launch -n N -- tfdist train` against its hand-written twin
  (bench/baselines/) for each engine (multi_worker and horovod: 2 processes; mirrored: one
  process over 2 logical CPUs; parameter_server: chief + ps + 2 workers) and both bundled models
  (the digits CNN and resnet_small; digits, 32 samples per replica), at one Keras per row told to
  both sides alike (TF_USE_LEGACY_KERAS=1 or 0 exported, and tfdist's --keras=2 or 3): tf-keras
  rows for every engine, Keras 3 rows where a hand-written Keras 3 script trains (mirrored; see
  NO_HAND_KERAS3 for the others). Each side's rank 0 names the Keras its fit ran
  (bench/probe.py); a row whose sides trained different Kerases stops the bench. Then, on the
  digits CNN, tfdist against itself: Keras 3 vs tf-keras (`--keras=3` vs `--keras=2`,
  multi_worker and horovod), and at Keras 3 the hang watchdog on vs off
  (`--watchdog_timeout=off`), the throughput meter and its input-wait timer on vs off
  (`--nometer`) and, with --model_dir, the preemption agreement on vs off (`--nopreemption`).
- weak_scaling.json (3): resnet_small with 2 workers against 1 (same per-worker batch), both
  engines and both sides (tf-keras), compared the same way; efficiency = samples/s ratio / 2.
  And the machine's ceiling: two plain processes against one.
- startup.json (4): seconds from launch to the first training step (its start, and its end),
  tfdist against its twin (multi_worker and horovod, tf-keras) in short runs of their own, one
  after the other; and `tfdist env`.

Before it starts, it prints how long the comparisons should take: each row's rounds and pairs of
runs priced at the seconds per round and per pair of runs that the rows on record took. Ended by
SIGTERM or Ctrl-C, it ends every process it started (bench/common.py). --quick measures the
equal-settings rows only, in less time, to +-5 % (QUICK below); the other rows stay on record.

Every process runs under bench/probe.py, which counts rank 0's finished steps for the slices and
records the first step the same way on both sides. Processes are pinned one core each by rank
(mirrored and parameter_server: left to the scheduler), with one intra-op thread. CPU per sample
= the CPU seconds of every process of the run (the launcher, guards, horovodrun, ranks, parameter
servers) in a slice / the samples rank 0 trained in it; samples/s: those samples / the slice's
wall seconds.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BENCH, BIN, load_result, machine, quiet_env  # noqa: E402
from common import end_children_on_signals, run, start, summary, wait_all  # noqa: E402
from common import write_result  # noqa: E402
from compare import Run, UnequalSettings, compare, steps_file  # noqa: E402
from tfdist.cluster.ports import free_port_base  # noqa: E402  (after common's `import tfdist`)

PYTHON = sys.executable
TFDIST = os.path.join(BIN, "tfdist")
HOROVODRUN = os.path.join(BIN, "horovodrun")
PROBE = os.path.join(BENCH, "probe.py")
BASELINES = os.path.join(BENCH, "baselines")
PER_REPLICA_BATCH = 32
MIRRORED_DEVICES = 2
# Processes of each engine's run (parameter_server: chief, ps, 2 workers).
PROCS = {"multi_worker": 2, "horovod": 2, "mirrored": 1, "parameter_server": 4}
# Left to the scheduler: mirrored is one process over both cores; the 4 processes of
# parameter_server hang in the first epoch when pinned with one intra-op thread each (seen on both
# sides).
UNPINNED = ("mirrored", "parameter_server")
STARTUP_STEPS = 5  # steps of a start-up run: it ends when they are done
# parameter_server: rank 0's steps count at epoch ends only (bench/probe.py), so its slices are
# whole epochs of under a second.
PS_STEPS_PER_EPOCH = 60
# The Kerases of the rows: 2 is tf-keras, 3 Keras 3 (tfdist train --keras), Keras 3 first: what
# users have by default.
KERASES = (3, 2)
KERAS_ROW = {2: "tf-keras", 3: "keras3"}  # in row names: multi_worker/cnn/keras3
LEGACY_KERAS = "TF_USE_LEGACY_KERAS"
# Engines whose hand-written twin cannot train Keras 3 the way its users write it: no Keras 3 twin
# row. Seen with bench/baselines/ on TensorFlow 2.18.1, Keras 3.15.1 (2026-11-27); tfdist trains
# Keras 3 under all three (docs/compatibility.md).
NO_HAND_KERAS3 = {
    "multi_worker":
    "Keras 3's fit under MultiWorkerMirroredStrategy: ValueError: Attempt to "
    "convert a value (PerReplica:...) (keras-team/keras#20585)",
    "parameter_server":
    "Keras 3 has no coordinator-driven fit: ValueError: To use this dataset, "
    "you need to pass this dataset to ClusterCoordinator.create_per_worker_dataset "
    "(keras-team/keras#18624)",
    "horovod":
    "Horovod's Keras API is Keras 2 only: AttributeError: 'Variable' object has no "
    "attribute 'ref' (horovod#4290)",
}


def config(side: str,
           engine: str,
           model: str,
           keras: int,
           label: str = "",
           procs: int = 0,
           extra=()) -> dict:
    """One run: `keras` 2 (tf-keras) or 3 (Keras 3), told to both sides the same way (commands)."""
    procs = procs or PROCS[engine]
    extra = list(extra)
    return dict(side=side,
                engine=engine,
                model=model,
                keras=keras,
                procs=procs,
                extra=extra,
                label=label or side,
                name=f"{side}/{engine}/{model}/{procs}p/{KERAS_ROW[keras]}" +
                "".join(" " + e for e in extra))


def against_twin(group: str,
                 subject: str,
                 goal: str,
                 prefix: str = "",
                 label: str = "",
                 extra=(),
                 engines=tuple(PROCS)) -> list[dict]:
    """tfdist (`extra` its flags) against its twin, at one Keras per row (both sides told it):
    each of `engines` whose twin trains that Keras, both models."""
    out = []
    for model in ("cnn", "resnet_small"):
        for keras in KERASES:
            for engine in engines:
                if engine in NO_HAND_KERAS3 and keras == 3:
                    continue
                out.append(
                    dict(name=f"{prefix}{engine}/{model}/{KERAS_ROW[keras]}",
                         group=group,
                         subject=subject,
                         goal=goal,
                         same_keras=True,
                         a=config("tfdist", engine, model, keras, label=label, extra=extra),
                         b=config("hand", engine, model, keras, label="hand-written")))
    return out


def twin_pairs() -> list[dict]:
    """tfdist against its twin at equal settings (one step a call, as the twin)."""
    return against_twin("twin", "tfdist", "within 2 %")


def pairs() -> list[dict]:
    """Every comparison of one round: A against B, A the subject of the verdict."""
    out = twin_pairs()
    for engine in ("multi_worker", "horovod"):
        out.append(
            dict(name=f"keras3/{engine}/cnn",
                 group="keras",
                 subject="Keras 3",
                 goal="samples/s >= 0.95 of tf-keras",
                 a=config("tfdist", engine, "cnn", 3, label="Keras 3"),
                 b=config("tfdist", engine, "cnn", 2, label="tf-keras")))
    additions = (("watchdog", "the watchdog", [], ["--watchdog_timeout=off"
                                                   ]), ("meter", "the meter", [], ["--nometer"]),
                 ("preemption", "the preemption agreement",
                  ["--model_dir={run_dir}", "--notensorboard"
                   ], ["--model_dir={run_dir}", "--notensorboard", "--nopreemption"]))
    # What a user gains with tfdist's defaults (`tfdist train` without settings: the steps a
    # call it chooses, `auto`, after the first epoch, which the warm-up passes) over the twin as
    # users write it (one step a call); 150 steps an epoch (parameter_server: 60, its slices').
    out += against_twin("gain",
                        "tfdist with its defaults",
                        "(info) the gain of tfdist's defaults",
                        prefix="defaults/",
                        label="tfdist's defaults, auto steps a call",
                        extra=["--steps_per_execution=auto"])
    for name, subject, on, off in additions:
        out.append(
            dict(name=f"{name}/multi_worker/cnn",
                 group="addition",
                 subject=subject,
                 goal="within 2 %",
                 same_keras=True,
                 a=config("tfdist", "multi_worker", "cnn", 3, label=f"{name} on", extra=on),
                 b=config("tfdist", "multi_worker", "cnn", 3, label=f"{name} off", extra=off)))
    return out


def weak_pairs() -> list[dict]:
    """Weak scaling: resnet_small with 2 workers against 1 (the same per-worker batch), for both
    engines and both sides; and the machine's ceiling, 2 plain processes against 1. tf-keras: the
    Keras both sides train under both engines."""
    out = []
    for engine in ("multi_worker", "horovod"):
        for side in ("tfdist", "hand"):
            out.append(
                dict(name=f"weak/{side}/{engine}",
                     group="weak",
                     subject="2 workers",
                     goal="efficiency >= 0.90 (resnet_small)",
                     same_keras=True,
                     a=config(side, engine, "resnet_small", 2, label="2 workers"),
                     b=config(side, engine, "resnet_small", 2, label="1 worker", procs=1)))
    out.append(
        dict(name="weak/limit/2 plain procs",
             group="weak",
             subject="2 processes",
             goal="the machine's ceiling: no communication at all",
             same_keras=True,
             a=config("hand", "plain", "resnet_small", 2, label="2 processes", procs=2),
             b=config("hand", "plain", "resnet_small", 2, label="1 process", procs=1)))
    return out


QUICK = ("the equal-settings rows only (tfdist against its twin), each in 2 pairs of runs of 6 "
         "rounds of 0.8 s slices, about 9 minutes; a cost is told to +-5 % (a full run: +-3 %), "
         "the rows marked (quick): for iterating, the other rows kept on record")
QUICK_TELLS = 0.05  # a quick row's widest half-interval that still tells a cost


def plan_text(todo: list[dict], args, kept: list[dict] = ()) -> str:
    """What the comparisons will take: each row's pairs of runs and rounds, a round being its two
    slices and what stopping and continuing them costs; that cost and a pair of runs' start-up
    and warm-up priced as the rows on record took them (row_costs). Under a budget (budget_seconds)
    the rows beyond the weak-scaling ones take at most that long (compare's deadline); the rows
    `kept` on record are named."""
    costs = row_costs(load_result("overhead"))
    if costs is None:
        return f"{len(todo)} comparisons: no rows on record to price them"
    per_pair, per_round = costs[0], 2 * args.slice + costs[1]
    least = {"weak": 0.0, "rows": 0.0}
    most = dict(least)
    for p in todo:
        n, pairs_ = p.get("rounds", args.rounds), p.get("run_pairs", 1)
        most_pairs = max(pairs_, p.get("max_run_pairs", pairs_))
        part = "weak" if p["group"] == "weak" else "rows"
        least[part] += least_seconds(p, args, costs)
        most[part] += most_pairs * per_pair + n * most_pairs // pairs_ * per_round
    budget = budget_seconds(args)
    if budget is not None:  # extra pairs of runs only while the budget allows
        most["rows"] = max(least["rows"], min(most["rows"], budget + per_pair))
    low, high = round(sum(least.values()) / 60), round(sum(most.values()) / 60)
    took = f"{low} to {high} minutes" if low != high else f"{low} minute{'s' * (low != 1)}"
    text = (f"{len(todo)} comparisons, {sum(p.get('rounds', args.rounds) for p in todo)} rounds "
            f"or more: {took} at {per_pair:.1f} s per pair of runs and {per_round:.2f} s per round "
            "(two slices and their stops, priced from the rows on record, "
            "bench/results/overhead.json)")
    if budget is not None:
        text = (f"the comparisons longest since measured that fit in {args.minutes:g} minutes at "
                "what each took last (a row that cannot tell yet gets more pairs of runs only "
                f"while they allow), and the weak-scaling ones: {text}")
    if kept:
        text += (f"; {len(kept)} kept on record, measured latest (--all or BENCH_ALL=1 measures "
                 f"them too): {', '.join(p['name'] for p in kept)}")
    return text


# The minutes a plain `make bench` gives the comparisons of overhead.json: with the all-reduce,
# weak scaling, the start-up runs and the input pipeline (about 5 minutes in the run of
# 2026-11-27, 4 on 2026-11-28) it stays under 30. All of them take 25 to 46 (BENCH_ALL=1).
BUDGET_MINUTES = 22


def budget_seconds(args) -> float | None:
    """The seconds the comparisons of overhead.json get, or None: --only's, --all's and --quick's
    rows are measured whole."""
    return None if args.only or args.all or args.quick else args.minutes * 60


def least_seconds(p: dict, args, costs: tuple[float, float]) -> float:
    """What comparison `p` takes without pairs of runs beyond its first "run_pairs", priced at
    `costs` (row_costs)."""
    return (p.get("run_pairs", 1) * costs[0] + p.get("rounds", args.rounds) *
            (2 * args.slice + costs[1]))


def budgeted(todo: list[dict], previous: dict | None, minutes: float,
             args) -> tuple[list[dict], list[dict]]:
    """(the comparisons this run measures, the overhead rows it keeps on record): the rows never
    measured (or whose record failed or is a quick run's) first, then the longest since measured,
    each priced at the seconds its record took (else least_seconds), taken in that order while
    they fit in `minutes` (at least one); the weak-scaling rows always. Without rows on record to
    price them, everything."""
    costs = row_costs(previous)
    if costs is None:
        return todo, []
    on_record = {
        r["name"]: r
        for r in previous["rows"] if not r.get("error") and not r.get("quick")
    }
    default_date = previous["machine"]["date"]

    def priority(p):
        row = on_record.get(p["name"])
        return (row is not None, row.get("date", default_date) if row else "")

    def seconds(p):
        row = on_record.get(p["name"])
        return row["seconds"] if row and row.get("seconds") else least_seconds(p, args, costs)

    rows = [p for p in todo if p["group"] != "weak"]
    left, chosen = minutes * 60, set()
    for p in sorted(rows, key=priority):  # stable: pairs()'s order among rows of one date
        if seconds(p) <= left or not chosen:
            chosen.add(p["name"])
            left -= seconds(p)
    measured = [p for p in todo if p["group"] == "weak" or p["name"] in chosen]
    return measured, [p for p in rows if p["name"] not in chosen]


def row_costs(previous: dict | None) -> tuple[float, float] | None:
    """(seconds per pair of runs, seconds per round beyond its two slices): a non-negative
    least-squares fit of the rows on record, seconds - rounds x 2 x slice = pairs of runs x a +
    rounds x b; None without two different rows."""
    previous = previous or {}
    default = previous.get("setup", {}).get("slice_seconds")
    rows = [
        r for r in previous.get("rows", []) if r.get("seconds") and r.get("rounds")
        and not r.get("error") and r.get("slice_seconds", default)
    ]
    if len({(r.get("run_pairs") or 1, r["rounds"]) for r in rows}) < 2:
        return None
    import numpy as np
    from scipy.optimize import nnls

    x = np.array([[r.get("run_pairs") or 1, r["rounds"]] for r in rows], dtype=float)
    y = np.array([r["seconds"] - r["rounds"] * 2 * r.get("slice_seconds", default) for r in rows])
    (a, b), _ = nnls(x, y)
    return float(a), float(b)


def train_args(cfg: dict, epochs: int, steps_per_epoch: int) -> list[str]:
    return [
        f"--model={cfg['model']}", f"--epochs={epochs}", f"--steps_per_epoch={steps_per_epoch}",
        f"--batch_size={PER_REPLICA_BATCH}"
    ]


def paths(cfg: dict, work: str, suffix: str = "") -> tuple[str, str]:
    """The prefix of a run's files (probe records, steps, its model_dir PREFIX.run) and its log."""
    tag = cfg["name"].replace("/", "-").replace(" ", "").replace("=", "-") + suffix
    return os.path.join(work, tag), os.path.join(work, tag + ".log")


def samples_per_step(cfg: dict) -> int:
    """Samples one step of rank 0's fit trains: a parameter-server step runs on one worker."""
    if cfg["engine"] == "parameter_server":
        return PER_REPLICA_BATCH
    if cfg["engine"] == "mirrored":
        return PER_REPLICA_BATCH * MIRRORED_DEVICES
    # plain: independent processes, rank 0's steps stand for each one's (the same work)
    return PER_REPLICA_BATCH * cfg["procs"]


def commands(cfg: dict, epochs: int, steps_per_epoch: int, prefix: str,
             exit_after_train: bool) -> list[tuple[list[str], dict]]:
    """The processes one configuration starts (command, extra environment), the chief first;
    `{run_dir}` in its extra flags becomes PREFIX.run."""
    pin = [] if cfg["engine"] in UNPINNED else ["--pin"]
    probe = [PYTHON, PROBE, prefix] + (["--exit_after_train"] if exit_after_train else []) + pin
    probe.append("--")
    n, engine = cfg["procs"], cfg["engine"]
    # The Keras, told to both sides alike: TensorFlow's switch exported either way (the twin
    # chooses by it as its users do, bench/baselines/digits_models.py), and tfdist's --keras.
    keras = {LEGACY_KERAS: "1" if cfg["keras"] == 2 else "0"}
    own = train_args(cfg, epochs, steps_per_epoch)
    if engine == "mirrored":
        own.append(f"--cpu_devices={MIRRORED_DEVICES}")
    if engine == "parameter_server":
        own.append("--optimizer=adam")  # tfdist's default there; the twin's lr as tfdist's
        own.append("--lr=0.001")
    if cfg["side"] == "tfdist":
        extra = [e.replace("{run_dir}", prefix + ".run") for e in cfg["extra"]]
        if not any(e.startswith("--steps_per_execution") for e in extra):
            extra.append("--steps_per_execution=1")  # the twin's count, whatever the default
        train = [
            TFDIST, "train", f"--strategy={engine}", "--pipeline=digits", f"--keras={cfg['keras']}"
        ] + own + extra
        if engine == "mirrored":
            return [(probe + train, keras)]
        return [([TFDIST, "launch", f"--nproc={n}", f"--strategy={engine}", "--"] + probe + train,
                 keras)]
    script = os.path.join(BASELINES, f"{engine}_keras.py")
    if engine == "horovod":
        return [
            ([HOROVODRUN, "-np", str(n), "-H", f"localhost:{n}", "--gloo"] + probe + [script] + own,
             keras)
        ]
    if engine == "mirrored":
        return [(probe + [script] + own, keras)]
    # multi_worker, parameter_server: a TF_CONFIG of their own; plain: independent processes
    base = str(free_port_base(n)) if engine != "plain" else "0"
    return [(probe + [script] + own, dict(keras, RANK=str(r), WORLD_SIZE=str(n), BASE_PORT=base))
            for r in range(n)]


def start_run(cfg: dict, args, work: str) -> Run:
    """Start one configuration that trains until it is killed (bench/compare.py's slices)."""
    prefix, log = paths(cfg, work)
    shutil.rmtree(prefix + ".run", ignore_errors=True)  # each pair of runs starts afresh
    steps = steps_file(prefix + ".steps")
    env = quiet_env(BENCH_STEPS_FILE=steps)
    per_epoch = args.steps_per_epoch
    if cfg["engine"] == "parameter_server":
        env["BENCH_COUNT_AT"] = "epoch"
        per_epoch = PS_STEPS_PER_EPOCH
    procs = [
        start(command, dict(env, **extra), log)
        for command, extra in commands(cfg, 10**6, per_epoch, prefix, False)
    ]
    return Run(procs, steps, samples_per_step(cfg), log, record=prefix + ".rank0.json")


def measure_startup(cfg: dict, args, work: str, round_index: int) -> dict:
    """One short run to its end: seconds from launch to the start and end of its first step."""
    prefix, log = paths(cfg, work, f"-start-r{round_index}")
    t0 = time.time()
    procs = [
        start(command, quiet_env(**extra), log)
        for command, extra in commands(cfg, 1, STARTUP_STEPS, prefix, True)
    ]
    status = wait_all(procs, args.timeout)
    ranks = []
    for path in sorted(glob.glob(prefix + ".rank*.json")):
        with open(path) as f:
            ranks.append(json.load(f))
    out = dict(cfg, round=round_index, status=status, log=log, ok=False)
    trained = [r for r in ranks if r.get("first_step_end")]
    if not trained or any(s != 0 for s in status):
        print(f"  start-up {cfg['name']}: FAILED (status {status}; see {log})", flush=True)
        return out
    out.update(ok=True,
               process_start_s=round(max(r["probe_start"] for r in ranks) - t0, 3),
               first_step_begin_s=round(max(r["first_step_begin"] for r in trained) - t0, 3),
               first_step_end_s=round(max(r["first_step_end"] for r in trained) - t0, 3))
    print(
        f"  start-up {cfg['name']}: first step {out['first_step_begin_s']:.1f} -> "
        f"{out['first_step_end_s']:.1f} s",
        flush=True)
    return out


def time_env(repeats: int) -> dict:
    """Wall seconds of `tfdist env --format=shell` (rank 0 of 2 of tfdist launch) and, as the
    floor, of the same interpreter doing nothing."""
    env = quiet_env(TFDIST_LAUNCH_RANK="0",
                    TFDIST_LAUNCH_WORLD_SIZE="2",
                    TFDIST_LAUNCH_PORT=str(free_port_base(2)))
    out = {}
    commands = {
        "tfdist_env_multi_worker": [TFDIST, "env", "--format=shell", "--strategy=multi_worker"],
        "tfdist_env_horovod": [TFDIST, "env", "--format=shell", "--strategy=horovod"],
        "python_no_op": [PYTHON, "-c", "pass"],
    }
    for name, command in commands.items():
        times = []
        for _ in range(repeats):
            status, seconds = run(command, timeout=60, env=env)
            times.append(round(seconds, 4) if status == 0 else None)
        out[name] = {"samples_s": times, **summary(times)}
    return out


def startup(runs: list[dict], env_times: dict) -> dict:
    """Seconds to the first step, tfdist vs its twin (multi_worker and horovod), and a plain
    single process."""
    out = {}
    for engine in ("multi_worker", "horovod"):
        a = {
            r["round"]: r
            for r in runs if r["ok"] and (r["side"], r["engine"]) == ("tfdist", engine)
        }
        b = {
            r["round"]: r
            for r in runs if r["ok"] and (r["side"], r["engine"]) == ("hand", engine)
        }
        both = [i for i in sorted(a) if i in b]
        end = [round(a[i]["first_step_end_s"] - b[i]["first_step_end_s"], 3) for i in both]
        begin = [round(a[i]["first_step_begin_s"] - b[i]["first_step_begin_s"], 3) for i in both]
        out[f"{engine}/cnn"] = {
            "tfdist_first_step_begin_s": summary([r["first_step_begin_s"] for r in a.values()], 2),
            "hand_first_step_begin_s": summary([r["first_step_begin_s"] for r in b.values()], 2),
            "tfdist_first_step_end_s": summary([r["first_step_end_s"] for r in a.values()], 2),
            "hand_first_step_end_s": summary([r["first_step_end_s"] for r in b.values()], 2),
            "added_s_to_first_step_begin": summary(begin, 2),
            "added_s_to_first_step_end": summary(end, 2),
            "goal": "tfdist adds < 1 s over the hand-written start",
            "met": _met(end, lambda x: x < 1.0) and _met(begin, lambda x: x < 1.0),
        }
    plain = [r for r in runs if r["ok"] and r["engine"] == "plain"]
    out["plain_single_process/cnn"] = {
        "first_step_begin_s": summary([r["first_step_begin_s"] for r in plain], 2),
        "first_step_end_s": summary([r["first_step_end_s"] for r in plain], 2),
    }
    out["tfdist_env"] = env_times
    return out


def startup_configs() -> list[dict]:
    out = [
        config(side, engine, "cnn", 2) for engine in ("multi_worker", "horovod")
        for side in ("tfdist", "hand")
    ]
    return out + [config("hand", "plain", "cnn", 2, procs=1)]


def weak_scaling(rows: list[dict]) -> dict:
    """Efficiency = samples/s(2 workers) / (2 x samples/s(1)): the median per-round ratio / 2,
    with its interval (min and max: the interval's ends)."""
    out = {}
    for row in rows:
        key = row["name"].split("/", 1)[1]
        r = row["rate_ratio"]
        eff = {k: None if r[k] is None else round(r[k] / 2, 3) for k in ("median", "low", "high")}
        eff.update(min=eff["low"], max=eff["high"], n=len(row["rate_ratio_rounds"]))
        eff["spread"] = (round(
            (eff["high"] - eff["low"]) / eff["median"], 3) if eff["median"] else None)
        ceiling = key.startswith("limit/")
        out[key] = {
            "one_worker": {
                "median": row["b_side"]["samples_per_sec"]
            },
            "two_workers": {
                "median": row["a_side"]["samples_per_sec"]
            },
            "efficiency": eff,
            "cpu_ratio": row["cpu_ratio"],
            "goal": row["goal"],
            "met": None if ceiling or eff["median"] is None else eff["median"] >= 0.90,
        }
    return out


def merge_rows(previous: dict | None, rows: list[dict]) -> list[dict]:
    """--only: this run's rows in place of the same rows of the results on record, the others
    kept (each says which run it is from), in the order of pairs(); rows on record that pairs()
    no longer has (e.g. the twin rows of before one Keras per row) are dropped."""
    order = [p["name"] for p in pairs()]
    kept = {}
    if previous:
        setup = previous["setup"]
        for row in previous["rows"]:
            if row["name"] not in order:
                continue
            kept[row["name"]] = {
                "quick":
                setup.get("quick"),
                "slice_seconds":
                setup.get("slice_seconds"),
                "date":
                previous["machine"]["date"],
                "load_average": [
                    previous["machine"]["load_average"][0],
                    previous.get("load_average_end", [None])[0]
                ],
                **row
            }
    kept.update({row["name"]: row for row in rows})
    return sorted(kept.values(), key=lambda r: order.index(r["name"]) if r["name"] in order else 99)


def _met(values: list, test) -> bool | None:
    values = [v for v in values if v is not None]
    return bool(test(statistics.median(values))) if values else None


def arguments(argv=None) -> argparse.Namespace:
    """The command line (argv: sys.argv's), --quick's settings applied."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds",
                        type=int,
                        default=24,
                        help="rounds (a slice of each side) of the tfdist-vs-twin pairs, over "
                        "their first --run_pairs pairs of runs")
    parser.add_argument("--run_pairs",
                        type=int,
                        default=4,
                        help="fresh pairs of runs the rounds of a tfdist-vs-twin pair are split "
                        "over (one pair of runs differs from the next by more than its slices "
                        "scatter)")
    parser.add_argument("--max_run_pairs",
                        type=int,
                        default=8,
                        help="pairs of runs a tfdist-vs-twin pair may get in all: one more "
                        "(with as many rounds) while its interval is wider than +-3 %%")
    parser.add_argument("--variant_rounds",
                        type=int,
                        default=16,
                        help="rounds of the Keras 3 and per-step-addition pairs (one pair of runs)")
    parser.add_argument("--weak_rounds", type=int, default=5)
    parser.add_argument("--slice",
                        type=float,
                        default=0.8,
                        help="seconds per slice, about (short: what differs between pairs of "
                        "runs outweighs what a longer slice would smooth)")
    parser.add_argument("--steps_per_epoch",
                        type=int,
                        default=150,
                        help="each run's epochs (the slices cross epoch ends)")
    parser.add_argument("--startup_rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help=QUICK)
    parser.add_argument("--timeout",
                        type=float,
                        default=300.0,
                        help="seconds a run may take to start and warm up")
    parser.add_argument("--only",
                        default="",
                        help="comma-separated beginnings of pair names, e.g. "
                        "'multi_worker/,horovod/' (the twin rows of both engines), 'keras3/', "
                        "'weak/'; no start-up runs then")
    parser.add_argument("--all",
                        action="store_true",
                        help="measure every comparison (25 to 46 minutes on a 2-core VM; "
                        "BENCH_ALL=1 make bench); without it, those longest since measured that "
                        "fit in --minutes, the others kept on record")
    parser.add_argument("--minutes",
                        type=float,
                        default=BUDGET_MINUTES,
                        help="minutes for the comparisons of overhead.json, each priced at what "
                        "its record took (the weak-scaling rows and start-up runs come on top)")
    parser.add_argument("--keep", action="store_true", help="keep the logs")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.run_pairs, args.max_run_pairs, args.startup_rounds = 12, 2, 2, 0
    return args


def todo_pairs(args: argparse.Namespace) -> list[dict]:
    """The comparisons this command line measures, each with its rounds and pairs of runs."""
    todo = [
        dict(p, rounds=args.variant_rounds) if p["group"] != "twin" else dict(
            p, run_pairs=args.run_pairs, max_run_pairs=args.max_run_pairs) for p in pairs()
    ]
    todo += [dict(p, rounds=args.weak_rounds) for p in weak_pairs()]
    if args.quick:
        todo = [dict(p, tells=QUICK_TELLS) for p in todo if p["group"] == "twin"]
    if args.only:
        todo = [p for p in todo if p["name"].startswith(tuple(args.only.split(",")))]
    return todo


def selection(args: argparse.Namespace,
              previous: dict | None = None) -> tuple[list[dict], list[dict]]:
    """(the comparisons this command line measures, the overhead rows it keeps on record):
    --only's, --all's and --quick's rows whole, else those that fit in --minutes (budgeted) by
    the record `previous` (None: overhead.json as on disk)."""
    todo = todo_pairs(args)
    if budget_seconds(args) is None:
        return todo, []
    return budgeted(todo, previous or load_result("overhead"), args.minutes, args)


def main() -> None:
    args = arguments()
    end_children_on_signals()  # ended (SIGTERM, Ctrl-C): no measured run is left behind
    # Past the first epoch's end: tracing and the first epoch-end work are behind the slices.
    warm_steps = args.steps_per_epoch + 20
    info = machine()
    work = tempfile.mkdtemp(prefix="tfdist-bench-training-")
    previous = load_result("overhead")  # the record this run prices its rows by and joins
    todo, kept = selection(args, previous)
    if args.quick:
        print(f"training.py --quick: {QUICK}", flush=True)
    print(plan_text(todo, args, kept), flush=True)
    started = time.time()
    budget, costs = budget_seconds(args), row_costs(previous)
    deadline = None
    if budget is not None and costs is not None:  # the weak-scaling rows come on top
        weak_least = sum(least_seconds(p, args, costs) for p in todo if p["group"] == "weak")
        deadline = time.monotonic() + budget + weak_least
    try:
        rows = compare(todo,
                       args.rounds,
                       lambda cfg: start_run(cfg, args, work),
                       slice_seconds=args.slice,
                       warm_steps=warm_steps,
                       timeout=args.timeout,
                       deadline=deadline,
                       least=lambda p: least_seconds(p, args, costs) if costs else 0.0)
    except UnequalSettings as e:
        sys.exit(f"training.py: stopped, nothing written: {e}")
    weak = [r for r in rows if r["group"] == "weak"]
    rows = [r for r in rows if r["group"] != "weak"]
    startup_runs = []
    for i in range(args.startup_rounds if not args.only else 0):
        print(f"start-up round {i + 1}/{args.startup_rounds}", flush=True)
        configs = startup_configs()
        for cfg in (configs if i % 2 == 0 else configs[::-1]):
            startup_runs.append(measure_startup(cfg, args, work, i))
    env_times = time_env(repeats=5) if startup_runs else None
    setup = {
        "quick":
        args.quick,
        "method":
        "alternating slices (bench/compare.py): both runs started together and warmed up, "
        "then one runs while the other's processes are stopped, A B, B A, ...",
        "rounds":
        args.rounds,
        "run_pairs":
        args.run_pairs,
        "max_run_pairs":
        args.max_run_pairs,
        "variant_rounds":
        args.variant_rounds,
        "weak_rounds":
        args.weak_rounds,
        "slice_seconds":
        args.slice,
        "steps_per_epoch":
        args.steps_per_epoch,
        "warm_steps":
        warm_steps,
        "startup_rounds":
        args.startup_rounds,
        "startup_steps":
        STARTUP_STEPS,
        "per_replica_batch":
        PER_REPLICA_BATCH,
        "data":
        "scikit-learn digits, 1437 train samples (8x8x1), tfdist's digits pipeline vs "
        "tf.data.from_tensor_slices in the hand-written scripts",
        "optimizer":
        "SGD(0.05 x replicas, momentum 0.9); parameter_server: Adam(0.001)",
        "cpu_per_sample":
        "user + system seconds of every process of the run (the launcher, guards, horovodrun, "
        "every rank, parameter servers: /proc/PID/stat of the process tree, read while it is "
        "stopped) in a slice, over the samples rank 0 trained in it",
        "samples_per_sec":
        "global samples/s of rank 0 in a slice (its steps x the global batch / the slice's wall "
        "seconds)",
        "interval":
        "median of the per-round ratios A/B, percentile bootstrap 95 % (scipy)",
        "pinning":
        "each process on one core by rank (mirrored and parameter_server: left to the "
        "scheduler), TF_NUM_INTRAOP_THREADS=1, OMP_NUM_THREADS=1",
        "tfdist_command":
        "tfdist launch -n N --strategy=S -- tfdist train --strategy=S "
        "--pipeline=digits --model=M",
        "hand_commands":
        "bench/baselines/<engine>_keras.py (horovod: under horovodrun --gloo)",
    }
    wall = round(time.time() - started, 1)
    results = {
        "overhead": {
            "benchmark": "overhead",
            "machine": info,
            "setup": setup,
            "rows": rows
        },
        "weak_scaling": {
            "benchmark": "weak_scaling",
            "machine": info,
            "setup": setup,
            "results": weak_scaling(weak),
            "rows": weak
        },
        "startup": {
            "benchmark": "startup",
            "machine": info,
            "setup": setup,
            "results": startup(startup_runs, env_times),
            "raw": startup_runs
        },
    }
    load_end = round(os.getloadavg()[0], 2)
    for row in rows:  # which run each row is from, so rows of several runs can stand together
        row.update(quick=args.quick,
                   slice_seconds=args.slice,
                   date=info["date"],
                   load_average=[info["load_average"][0], load_end])
    if args.only or kept or args.quick:
        results["overhead"]["rows"] = merge_rows(previous, rows)
        # A quick run's rows join a full run's: that run's settings describe the others.
        base = previous["setup"] if args.quick and previous else setup
        results["overhead"]["setup"] = dict(
            base, quick=any(r.get("quick") for r in results["overhead"]["rows"]))
    measured = {"overhead": rows, "weak_scaling": weak, "startup": startup_runs}
    for name, result in results.items():
        if not measured[name]:  # --only or --quick left it out: its record stays
            continue
        result["wall_seconds"] = wall
        result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
        print(f"wrote {write_result(name, result)}", flush=True)
    for row in rows + weak:
        c, r = row["cpu_ratio"], row["rate_ratio"]
        print(f"{row['name']:32} CPU/sample {c['median']} [{c['low']}, {c['high']}]  samples/s "
              f"{r['median']} [{r['low']}, {r['high']}]  {row['verdict']}")
    failed = [row["name"] for row in rows + weak if row.get("error")]
    failed += [r["name"] for r in startup_runs if not r["ok"]]
    if args.quick:
        print(f"training.py --quick: {QUICK}", flush=True)
    if args.keep or failed:
        print(f"logs: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
