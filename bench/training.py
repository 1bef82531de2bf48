"""Benchmarks 1, 3 and 4: tfdist against hand-written TensorFlow and Horovod, in CPU-seconds per
trained sample, plus tfdist's own variants (Keras 3, each per-step addition on/off).

  .venv/bin/python bench/training.py [--rounds=9] [--quick] [--only=NAME_START,...]

Every comparison goes through bench/compare.py's `compare` (interleaved rounds, A B B A ..., the
median ratio with a bootstrap 95 % interval and its verdict):

- overhead.json (1): `tfdist launch -n N -- tfdist train` against its hand-written twin
  (bench/baselines/) for each engine (multi_worker and horovod: 2 processes; mirrored: one
  process over 2 logical CPUs; parameter_server: chief + ps + 2 workers) and both bundled models
  (the digits CNN and resnet_small; digits, 32 samples per replica). Then, on the digits CNN,
  tfdist against itself: Keras 3 vs tf-keras (`--keras=3` vs `--keras=2`, multi_worker and
  horovod), the hang watchdog on vs off (`--watchdog_timeout=off`), the throughput meter and its
  input-wait timer on vs off (`--nometer`) and, with --model_dir, the preemption agreement on vs
  off (`--nopreemption`).
- weak_scaling.json (3): resnet_small with 1 vs 2 workers, same per-worker batch, both engines
  and both sides; and the machine's ceiling: two plain processes at once vs one alone.
- startup.json (4): seconds from launch to the first training step (its start, and its end),
  from the multi_worker and horovod runs of (1); and `tfdist env`.

Every process runs under bench/probe.py, which records the epochs, the first step and peak memory
the same way on both sides, sums the CPU time of every process of the run (the launcher, guards,
ranks, parameter servers) from the second epoch's start to the last epoch's end, and ends the
process when model.fit returns. Processes are pinned one core each by rank (mirrored: one process,
both cores), with one intra-op thread. CPU per sample = those CPU-seconds / the samples trained in
those epochs; samples/s: rank 0's, over the same epochs.
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
from common import BENCH, BIN, free_port_block, load_result, machine, quiet_env  # noqa: E402
from common import run, start, summary, wait_all, write_result  # noqa: E402
from compare import compare  # noqa: E402

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


def config(side: str, engine: str, model: str, label: str = "", procs: int = 0, extra=()) -> dict:
    procs = procs or PROCS[engine]
    extra = list(extra)
    return dict(side=side,
                engine=engine,
                model=model,
                procs=procs,
                extra=extra,
                label=label or side,
                name=f"{side}/{engine}/{model}/{procs}p" + "".join(" " + e for e in extra))


def pairs() -> list[dict]:
    """Every comparison of one round: A against B, A the subject of the verdict."""
    out = []
    for model in ("cnn", "resnet_small"):
        for engine in PROCS:
            out.append(
                dict(name=f"{engine}/{model}",
                     group="twin",
                     subject="tfdist",
                     goal="within 2 %",
                     a=config("tfdist", engine, model),
                     b=config("hand", engine, model, label="hand-written")))
    for engine in ("multi_worker", "horovod"):
        out.append(
            dict(name=f"keras3/{engine}/cnn",
                 group="keras",
                 subject="Keras 3",
                 goal="samples/s >= 0.95 of tf-keras",
                 a=config("tfdist", engine, "cnn", label="Keras 3", extra=["--keras=3"]),
                 b=config("tfdist", engine, "cnn", label="tf-keras", extra=["--keras=2"])))
    additions = (("watchdog", "the watchdog", [], ["--watchdog_timeout=off"
                                                   ]), ("meter", "the meter", [], ["--nometer"]),
                 ("preemption", "the preemption agreement",
                  ["--model_dir={run_dir}", "--notensorboard"
                   ], ["--model_dir={run_dir}", "--notensorboard", "--nopreemption"]))
    for name, subject, on, off in additions:
        out.append(
            dict(name=f"{name}/multi_worker/cnn",
                 group="addition",
                 subject=subject,
                 goal="within 2 %",
                 a=config("tfdist", "multi_worker", "cnn", label=f"{name} on", extra=on),
                 b=config("tfdist", "multi_worker", "cnn", label=f"{name} off", extra=off)))
    return out


def weak_configs() -> list[dict]:
    """The single-worker runs of weak scaling, and the machine's ceiling (plain processes)."""
    out = [
        config(side, engine, "resnet_small", procs=1) for engine in ("multi_worker", "horovod")
        for side in ("tfdist", "hand")
    ]
    out += [config("hand", "plain", "resnet_small", procs=n) for n in (1, 2)]
    out.append(config("hand", "plain", "cnn", procs=1))
    return out


def train_args(cfg: dict, args) -> list[str]:
    return [
        f"--model={cfg['model']}", f"--epochs={args.epochs}",
        f"--steps_per_epoch={args.steps_per_epoch}", f"--batch_size={PER_REPLICA_BATCH}"
    ]


def samples_per_step(cfg: dict) -> int:
    """Samples one step of rank 0's fit trains: a parameter-server step runs on one worker."""
    if cfg["engine"] == "parameter_server":
        return PER_REPLICA_BATCH
    if cfg["engine"] == "mirrored":
        return PER_REPLICA_BATCH * MIRRORED_DEVICES
    return PER_REPLICA_BATCH * cfg["procs"]


def launch(cfg: dict, args, prefix: str, log: str, run_dir: str) -> tuple[float, list[int]]:
    """Start one configuration; return its launch time and the exit statuses."""
    pin = [] if cfg["engine"] in UNPINNED else ["--pin"]
    probe = [PYTHON, PROBE, prefix, "--exit_after_train"] + pin + ["--"]
    env = quiet_env(BENCH_TREE_ROOT=str(os.getpid()))
    n, engine = cfg["procs"], cfg["engine"]
    own = train_args(cfg, args)
    if engine == "mirrored":
        own.append(f"--cpu_devices={MIRRORED_DEVICES}")
    if engine == "parameter_server":
        own.append("--optimizer=adam")  # tfdist's default there; the twin's lr as tfdist's
        own.append("--lr=0.001")
    t0 = time.time()
    if cfg["side"] == "tfdist":
        extra = [e.replace("{run_dir}", run_dir) for e in cfg["extra"]]
        train = [TFDIST, "train", f"--strategy={engine}", "--pipeline=digits"] + own + extra
        if engine == "mirrored":
            command = probe + train
        else:
            command = [TFDIST, "launch", f"--nproc={n}", f"--strategy={engine}", "--"
                       ] + probe + train
        return t0, wait_all([start(command, env, log)], args.timeout)
    script = os.path.join(BASELINES, f"{engine}_keras.py")
    if engine == "horovod":
        command = [HOROVODRUN, "-np", str(n), "-H", f"localhost:{n}", "--gloo"] + probe + [script
                                                                                           ] + own
        return t0, wait_all([start(command, env, log)], args.timeout)
    if engine == "mirrored":
        return t0, wait_all([start(probe + [script] + own, env, log)], args.timeout)
    base = free_port_block(n) if engine in ("multi_worker", "parameter_server") else 0
    procs = [
        start(probe + [script] + own, dict(env, RANK=str(r), WORLD_SIZE=str(n),
                                           BASE_PORT=str(base)), log) for r in range(n)
    ]
    if engine == "parameter_server":  # the servers never return: stop them after the chief
        status = wait_all(procs[:1], args.timeout)
        wait_all(procs[1:], 0)
        return t0, status
    return t0, wait_all(procs, args.timeout)


def measure(cfg: dict, args, work: str, round_index: int) -> dict:
    tag = cfg["name"].replace("/", "-").replace(" ", "").replace("=", "-") + f"-r{round_index}"
    prefix, log = os.path.join(work, tag), os.path.join(work, tag + ".log")
    run_dir = os.path.join(work, tag + ".run")
    t0, status = launch(cfg, args, prefix, log, run_dir)
    shutil.rmtree(run_dir, ignore_errors=True)
    ranks = []
    for path in sorted(glob.glob(prefix + ".rank*.json")):
        with open(path) as f:
            ranks.append(json.load(f))
    out = dict(cfg, round=round_index, status=status, log=log, ok=False)
    chief = next((r for r in ranks if r["rank"] == 0), None)
    trained = [r for r in ranks if "train_end" in r]
    if chief is None or "train_end" not in chief or not chief.get("cpu_window") or any(
            s != 0 for s in status):
        print(f"  {cfg['name']}: FAILED (status {status}; see {log})", flush=True)
        return out
    epochs = chief["epochs"]
    steady = epochs[1:] or epochs
    samples = samples_per_step(cfg) * args.steps_per_epoch * len(steady)
    cpu_start, cpu_end, processes = chief["cpu_window"]
    if cfg["engine"] == "plain" and cfg["procs"] > 1:  # independent processes: their rates add
        rate = sum(PER_REPLICA_BATCH * args.steps_per_epoch * len(r["epochs"][1:]) /
                   (r["epochs"][-1][1] - r["epochs"][1][0]) for r in trained)
    else:
        rate = samples / (steady[-1][1] - steady[0][0])
    out.update(
        ok=True,
        samples_per_sec=round(rate, 2),
        cpu_seconds=round(cpu_end - cpu_start, 3),
        cpu_per_sample=(cpu_end - cpu_start) / samples,
        processes=processes,
        epoch_samples_per_sec=[
            round(samples_per_step(cfg) * args.steps_per_epoch / (e - b), 2) for b, e in epochs
        ],
        peak_rss_mb=[r["peak_rss_mb"] for r in sorted(trained, key=lambda r: r["rank"])],
        process_start_s=round(max(r["probe_start"] for r in ranks) - t0, 3),
        first_step_begin_s=round(max(r["first_step_begin"] for r in trained) - t0, 3),
        first_step_end_s=round(max(r["first_step_end"] for r in trained) - t0, 3),
    )
    print(
        f"  {cfg['name']}: {1e3 * out['cpu_per_sample']:.3f} CPU-ms/sample "
        f"({processes} processes), {out['samples_per_sec']:.0f} samples/s, first step "
        f"{out['first_step_begin_s']:.1f} -> {out['first_step_end_s']:.1f} s",
        flush=True)
    return out


def time_env(repeats: int) -> dict:
    """Wall seconds of `tfdist env --format=shell` (rank 0 of 2 of tfdist launch) and, as the
    floor, of the same interpreter doing nothing."""
    env = quiet_env(TFDIST_LAUNCH_RANK="0",
                    TFDIST_LAUNCH_WORLD_SIZE="2",
                    TFDIST_LAUNCH_PORT=str(free_port_block(2)))
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


def startup(rows: list[dict], plain: list[dict], env_times: dict) -> dict:
    """Seconds to the first step, tfdist vs its twin, from the multi_worker and horovod rows."""
    out = {}
    for row in rows:
        if row["group"] != "twin" or row["name"].split("/")[0] not in ("multi_worker", "horovod"):
            continue
        a = {r["round"]: r for r in row["runs"]["a"] if r["ok"]}
        b = {r["round"]: r for r in row["runs"]["b"] if r["ok"]}
        both = [i for i in sorted(a) if i in b]
        end = [round(a[i]["first_step_end_s"] - b[i]["first_step_end_s"], 3) for i in both]
        begin = [round(a[i]["first_step_begin_s"] - b[i]["first_step_begin_s"], 3) for i in both]
        out[row["name"]] = {
            "tfdist_first_step_begin_s": summary([r["first_step_begin_s"] for r in a.values()], 2),
            "hand_first_step_begin_s": summary([r["first_step_begin_s"] for r in b.values()], 2),
            "tfdist_first_step_end_s": summary([r["first_step_end_s"] for r in a.values()], 2),
            "hand_first_step_end_s": summary([r["first_step_end_s"] for r in b.values()], 2),
            "added_s_to_first_step_begin": summary(begin, 2),
            "added_s_to_first_step_end": summary(end, 2),
            "goal": "tfdist adds < 1 s over the hand-written start",
            "met": _met(end, lambda x: x < 1.0) and _met(begin, lambda x: x < 1.0),
        }
    out["plain_single_process/cnn"] = {
        "first_step_begin_s": summary([r["first_step_begin_s"] for r in plain if r["ok"]], 2),
        "first_step_end_s": summary([r["first_step_end_s"] for r in plain if r["ok"]], 2),
    }
    out["tfdist_env"] = env_times
    return out


def weak_scaling(rows: list[dict], runs: list[dict]) -> dict:
    """Efficiency = samples/s(2 workers) / (2 x samples/s(1)): medians of each."""
    two = {}
    for row in rows:
        if row["group"] == "twin" and row["name"] in ("multi_worker/resnet_small",
                                                      "horovod/resnet_small"):
            engine = row["name"].split("/")[0]
            two[f"tfdist/{engine}"] = row["a_side"]["samples_per_sec"]
            two[f"hand/{engine}"] = row["b_side"]["samples_per_sec"]
    one = {}
    for r in runs:
        if r["ok"]:
            key = f"{r['side']}/{r['engine']}" if r["engine"] != "plain" else f"plain/{r['procs']}"
            one.setdefault((key, r["model"]), []).append(r["samples_per_sec"])
    out = {}
    for key, rate2 in two.items():
        rate1 = one.get((key, "resnet_small"))
        eff = [round(rate2 / (2 * x), 3) for x in rate1] if rate1 and rate2 else []
        out[key] = {
            "one_worker": summary(rate1 or [], 1),
            "two_workers": {
                "median": rate2
            },
            "efficiency": summary(eff, 3),
            "goal": "efficiency >= 0.90 (resnet_small)",
            "met": _met(eff, lambda x: x >= 0.90),
        }
    p1, p2 = one.get(("plain/1", "resnet_small")), one.get(("plain/2", "resnet_small"))
    if p1 and p2:
        eff = [round(b / (2 * a), 3) for a, b in zip(p1, p2)]
        out["limit/2 plain procs"] = {
            "one_worker": summary(p1, 1),
            "two_workers": summary(p2, 1),
            "efficiency": summary(eff, 3),
            "goal": "the machine's ceiling: no communication at all",
            "met": None,
        }
    return out


def merge_rows(previous: dict | None, rows: list[dict]) -> list[dict]:
    """--only: this run's rows in place of the same rows of the results on record, the others
    kept (each says which run it is from), in the order of pairs()."""
    kept = {}
    if previous:
        setup = previous["setup"]
        for row in previous["rows"]:
            kept[row["name"]] = {
                "quick": setup.get("quick"),
                "epochs": setup["epochs"],
                "steps_per_epoch": setup["steps_per_epoch"],
                **row
            }
    kept.update({row["name"]: row for row in rows})
    order = [p["name"] for p in pairs()]
    return sorted(kept.values(), key=lambda r: order.index(r["name"]) if r["name"] in order else 99)


def _met(values: list, test) -> bool | None:
    values = [v for v in values if v is not None]
    return bool(test(statistics.median(values))) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--weak_rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps_per_epoch", type=int, default=40)
    parser.add_argument("--quick",
                        action="store_true",
                        help="3 rounds, 1 of weak scaling, "
                        "3 epochs of 25 steps: for iterating, not for the record")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    parser.add_argument("--only",
                        default="",
                        help="comma-separated beginnings of pair names, e.g. "
                        "'multi_worker/,horovod/' (the twin rows of both engines), 'keras3/'")
    parser.add_argument("--keep", action="store_true", help="keep the logs and probe files")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.weak_rounds, args.epochs, args.steps_per_epoch = 3, 1, 3, 25
    info = machine()
    work = tempfile.mkdtemp(prefix="tfdist-bench-training-")
    todo = pairs()
    if args.only:
        todo = [p for p in todo if p["name"].startswith(tuple(args.only.split(",")))]
    started = time.time()
    rows = compare(todo, args.rounds, lambda cfg, i: measure(cfg, args, work, i))
    weak_runs = []
    for i in range(args.weak_rounds if not args.only else 0):
        print(f"weak scaling round {i + 1}/{args.weak_rounds}", flush=True)
        for cfg in weak_configs():
            weak_runs.append(measure(cfg, args, work, i))
    env_times = time_env(repeats=5)
    setup = {
        "quick":
        args.quick,
        "rounds":
        args.rounds,
        "weak_rounds":
        args.weak_rounds,
        "epochs":
        args.epochs,
        "steps_per_epoch":
        args.steps_per_epoch,
        "per_replica_batch":
        PER_REPLICA_BATCH,
        "data":
        "scikit-learn digits, 1437 train samples (8x8x1), tfdist's digits pipeline vs "
        "tf.data.from_tensor_slices in the hand-written scripts",
        "optimizer":
        "SGD(0.05 x replicas, momentum 0.9); parameter_server: Adam(0.001)",
        "cpu_per_sample":
        "user + system seconds of every process of the run (the launcher, "
        "guards, horovodrun, every rank, parameter servers: /proc/PID/stat of the process tree) "
        "from the second epoch's start to the last epoch's end, over the samples trained then",
        "samples_per_sec":
        "global samples/s of rank 0 over epochs 2..E",
        "interval":
        "median of the per-round ratios A/B, percentile bootstrap 95 % (scipy)",
        "pinning":
        "each process on one core by rank (mirrored: one process over 2 logical "
        "CPUs, unpinned), TF_NUM_INTRAOP_THREADS=1, OMP_NUM_THREADS=1",
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
            "results": weak_scaling(rows, weak_runs),
            "raw": weak_runs
        },
        "startup": {
            "benchmark": "startup",
            "machine": info,
            "setup": setup,
            "results": startup(rows, [r for r in weak_runs if r["model"] == "cnn"], env_times)
        },
    }
    for row in rows:  # which run each row is from, so rows of several runs can stand together
        row.update(quick=args.quick, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch)
    if args.only:
        results["overhead"]["rows"] = merge_rows(load_result("overhead"), rows)
        setup["quick"] = any(r.get("quick") for r in results["overhead"]["rows"])
    for name, result in results.items():
        if args.only and name != "overhead":
            continue
        result["wall_seconds"] = wall
        result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
        print(f"wrote {write_result(name, result)}", flush=True)
    for row in rows:
        c, r = row["cpu_ratio"], row["rate_ratio"]
        print(f"{row['name']:32} CPU/sample {c['median']} [{c['low']}, {c['high']}]  samples/s "
              f"{r['median']} [{r['low']}, {r['high']}]  {row['verdict']}")
    if args.keep or any(not r["ok"] for row in rows for s in "ab" for r in row["runs"][s]):
        print(f"logs: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
