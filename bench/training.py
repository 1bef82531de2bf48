"""Benchmarks 1, 3 and 4: tfdist against hand-written TensorFlow and Horovod, trained side by side.

  .venv/bin/python bench/training.py [--rounds=5] [--epochs=4] [--steps_per_epoch=25]

One matrix of training runs, repeated in --rounds rounds (each round runs every configuration
once, tfdist and its hand-written twin back to back, their order alternating), feeds three results:

- overhead.json (1): steady-state samples/s and peak memory per process of `tfdist launch -n 2 --
  tfdist train` vs bench/baselines/{multi_worker,horovod}_keras.py on 2 processes, for the digits
  CNN and resnet_small (digits, 32 samples per replica, SGD + momentum, linear rate scaling).
- weak_scaling.json (3): resnet_small with 1 vs 2 workers, same per-worker batch;
  efficiency = samples/s(2) / (2 x samples/s(1)), for both engines and both sides; and the
  machine's ceiling: two independent plain processes at once (one per core) vs one alone.
- startup.json (4): seconds from launch to the first training step (its start, and its end:
  the first step traces and compiles), 2 processes vs a single plain script; and `tfdist env`.

Every process runs under bench/probe.py, pinned to one core with one intra-op thread (2 workers on
this 2-core machine: one core each), which records the epochs, the first step and peak memory the
same way on both sides and ends the process when model.fit returns. Throughput: global samples/s
of rank 0 over the epochs after the first (the first traces the step function). Ratios are
computed within each round (tfdist and its twin ran back to back) and their median is reported.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BENCH, BIN, free_port_block, machine, quiet_env, ratio  # noqa: E402
from common import run, start, summary, wait_all, write_result  # noqa: E402

PYTHON = sys.executable
TFDIST = os.path.join(BIN, "tfdist")
HOROVODRUN = os.path.join(BIN, "horovodrun")
PROBE = os.path.join(BENCH, "probe.py")
BASELINES = os.path.join(BENCH, "baselines")
BASELINE_SCRIPT = {
    "multi_worker": os.path.join(BASELINES, "multi_worker_keras.py"),
    "horovod": os.path.join(BASELINES, "horovod_keras.py"),
    "plain": os.path.join(BASELINES, "plain_keras.py"),
}
PER_REPLICA_BATCH = 32


def configs() -> list[dict]:
    """Every configuration of one round, tfdist next to its hand-written twin."""
    out = []
    for model, procs in (("cnn", 2), ("resnet_small", 2), ("resnet_small", 1)):
        for engine in ("multi_worker", "horovod"):
            for side in ("tfdist", "hand"):
                out.append(dict(engine=engine, side=side, model=model, procs=procs))
    out.append(dict(engine="plain", side="hand", model="cnn", procs=1))
    # The machine's own ceiling for weak scaling: two plain single-process runs at once, one per
    # core, nothing shared between them but the machine, against one alone.
    for procs in (1, 2):
        out.append(dict(engine="plain", side="hand", model="resnet_small", procs=procs))
    for c in out:
        c["name"] = f"{c['side']}/{c['engine']}/{c['model']}/{c['procs']}p"
    return out


def train_args(cfg: dict, args) -> list[str]:
    return [
        f"--model={cfg['model']}", f"--epochs={args.epochs}",
        f"--steps_per_epoch={args.steps_per_epoch}", f"--batch_size={PER_REPLICA_BATCH}"
    ]


def launch(cfg: dict, args, prefix: str, log: str) -> tuple[float, list[int]]:
    """Start one configuration; return its launch time and the exit statuses."""
    probe = [PYTHON, PROBE, prefix, "--pin", "--exit_after_train", "--"]
    env = quiet_env()
    n, engine = cfg["procs"], cfg["engine"]
    t0 = time.time()
    if cfg["side"] == "tfdist":
        command = [TFDIST, "launch", f"--nproc={n}", f"--strategy={engine}", "--"] + probe + [
            TFDIST, "train", f"--strategy={engine}", "--pipeline=digits"
        ] + train_args(cfg, args)
        procs = [start(command, env, log)]
    elif engine == "horovod":
        command = [HOROVODRUN, "-np", str(n), "-H", f"localhost:{n}", "--gloo"
                   ] + probe + [BASELINE_SCRIPT["horovod"]] + train_args(cfg, args)
        procs = [start(command, env, log)]
    elif engine == "multi_worker":
        base = free_port_block(n)
        procs = [
            start(probe + [BASELINE_SCRIPT["multi_worker"]] + train_args(cfg, args),
                  dict(env, RANK=str(r), WORLD_SIZE=str(n), BASE_PORT=str(base)), log)
            for r in range(n)
        ]
    else:  # plain: n independent processes, each pinned to its own core (RANK picks it)
        procs = [
            start(probe + [BASELINE_SCRIPT["plain"]] + train_args(cfg, args),
                  dict(env, RANK=str(r)), log) for r in range(n)
        ]
    return t0, wait_all(procs, args.timeout)


def measure(cfg: dict, args, work: str, round_index: int) -> dict:
    tag = cfg["name"].replace("/", "-") + f"-r{round_index}"
    prefix, log = os.path.join(work, tag), os.path.join(work, tag + ".log")
    t0, status = launch(cfg, args, prefix, log)
    ranks = []
    for path in sorted(glob.glob(prefix + ".rank*.json")):
        with open(path) as f:
            ranks.append(json.load(f))
    out = dict(cfg, round=round_index, status=status, log=log, ok=False)
    if len(ranks) != cfg["procs"] or any("train_end" not in r for r in ranks):
        print(f"  {cfg['name']}: FAILED (status {status}; see {log})", flush=True)
        return out
    chief = next(r for r in ranks if r["rank"] == 0)
    epochs = chief["epochs"]
    samples = PER_REPLICA_BATCH * cfg["procs"] * args.steps_per_epoch
    steady = epochs[1:] or epochs
    rate = samples * len(steady) / (steady[-1][1] - steady[0][0])
    if cfg["engine"] == "plain" and cfg["procs"] > 1:
        # Independent processes: the sum of their own rates.
        rate = 0.0
        for r in ranks:
            own = r["epochs"][1:] or r["epochs"]
            rate += PER_REPLICA_BATCH * args.steps_per_epoch * len(own) / (own[-1][1] - own[0][0])
    out.update(
        ok=True,
        samples_per_sec=round(rate, 2),
        epoch_samples_per_sec=[round(samples / (e - b), 2) for b, e in epochs],
        peak_rss_mb=[r["peak_rss_mb"] for r in sorted(ranks, key=lambda r: r["rank"])],
        process_start_s=round(max(r["probe_start"] for r in ranks) - t0, 3),
        first_step_begin_s=round(max(r["first_step_begin"] for r in ranks) - t0, 3),
        first_step_end_s=round(max(r["first_step_end"] for r in ranks) - t0, 3),
    )
    print(
        f"  {cfg['name']}: {out['samples_per_sec']:.0f} samples/s, peak "
        f"{max(out['peak_rss_mb']):.0f} MB, first step {out['first_step_begin_s']:.1f} -> "
        f"{out['first_step_end_s']:.1f} s",
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


def by_config(runs: list[dict]) -> dict:
    grouped: dict = {}
    for r in runs:
        grouped.setdefault(r["name"], []).append(r)
    return grouped


def paired(runs: list[dict], a: str, b: str, key) -> list[float]:
    """Per-round ratios key(a) / key(b) of configurations a and b."""
    ra = {r["round"]: r for r in runs if r["name"] == a and r["ok"]}
    rb = {r["round"]: r for r in runs if r["name"] == b and r["ok"]}
    return [ratio(key(ra[i]), key(rb[i])) for i in sorted(ra) if i in rb]


def config_summary(runs: list[dict]) -> dict:
    ok = [r for r in runs if r["ok"]]
    return {
        "runs_ok": len(ok),
        "runs": len(runs),
        "samples_per_sec": summary([r["samples_per_sec"] for r in ok], 1),
        "peak_rss_mb": summary([max(r["peak_rss_mb"]) for r in ok], 1),
        "first_step_begin_s": summary([r["first_step_begin_s"] for r in ok], 2),
        "first_step_end_s": summary([r["first_step_end_s"] for r in ok], 2),
    }


def analyse(runs: list[dict], args, info: dict, env_times: dict) -> dict:
    grouped = by_config(runs)
    configs_summary = {name: config_summary(rs) for name, rs in grouped.items()}

    def thr(r):
        return r["samples_per_sec"]

    def mem(r):
        return max(r["peak_rss_mb"])

    overhead, weak, startup = {}, {}, {}
    for engine in ("multi_worker", "horovod"):
        for model in ("cnn", "resnet_small"):
            t, h = f"tfdist/{engine}/{model}/2p", f"hand/{engine}/{model}/2p"
            thr_r, mem_r = paired(runs, t, h, thr), paired(runs, t, h, mem)
            overhead[f"{engine}/{model}"] = {
                "tfdist": configs_summary.get(t),
                "hand": configs_summary.get(h),
                "throughput_ratio": summary(thr_r, 3),
                "throughput_ratio_rounds": thr_r,
                "memory_ratio": summary(mem_r, 3),
                "memory_ratio_rounds": mem_r,
                "goal": "throughput ratio >= 0.98, memory ratio <= 1.05",
                "met": _met(thr_r, lambda x: x >= 0.98) and _met(mem_r, lambda x: x <= 1.05),
            }
            begin = paired(runs, t, h, lambda r: r["first_step_begin_s"])
            end_diff = _diffs(runs, t, h, "first_step_end_s")
            begin_diff = _diffs(runs, t, h, "first_step_begin_s")
            startup[f"{engine}/{model}"] = {
                "tfdist_first_step_begin_s": configs_summary.get(t, {}).get("first_step_begin_s"),
                "hand_first_step_begin_s": configs_summary.get(h, {}).get("first_step_begin_s"),
                "tfdist_first_step_end_s": configs_summary.get(t, {}).get("first_step_end_s"),
                "hand_first_step_end_s": configs_summary.get(h, {}).get("first_step_end_s"),
                "added_s_to_first_step_begin": summary(begin_diff, 2),
                "added_s_to_first_step_end": summary(end_diff, 2),
                "added_s_rounds": {
                    "begin": begin_diff,
                    "end": end_diff
                },
                "begin_ratio_rounds": begin,
                "goal": "tfdist adds < 1 s over the hand-written start",
                "met": _met(end_diff, lambda x: x < 1.0) and _met(begin_diff, lambda x: x < 1.0),
            }
        for side in ("tfdist", "hand"):
            one, two = f"{side}/{engine}/resnet_small/1p", f"{side}/{engine}/resnet_small/2p"
            eff = [x / 2 if x is not None else None for x in paired(runs, two, one, thr)]
            weak[f"{side}/{engine}"] = {
                "one_worker": configs_summary.get(one, {}).get("samples_per_sec"),
                "two_workers": configs_summary.get(two, {}).get("samples_per_sec"),
                "efficiency": summary(eff, 3),
                "efficiency_rounds": eff,
                "goal": "efficiency >= 0.90 (resnet_small)",
                "met": _met(eff, lambda x: x >= 0.90),
            }
    one, two = "hand/plain/resnet_small/1p", "hand/plain/resnet_small/2p"
    eff = [x / 2 if x is not None else None for x in paired(runs, two, one, thr)]
    weak["limit/2 plain procs"] = {
        "one_worker": configs_summary.get(one, {}).get("samples_per_sec"),
        "two_workers": configs_summary.get(two, {}).get("samples_per_sec"),
        "efficiency": summary(eff, 3),
        "efficiency_rounds": eff,
        "goal": "the machine's ceiling: no communication at all",
        "met": None,
    }
    plain = configs_summary.get("hand/plain/cnn/1p", {})
    startup["plain_single_process/cnn"] = {
        "first_step_begin_s": plain.get("first_step_begin_s"),
        "first_step_end_s": plain.get("first_step_end_s"),
    }
    startup["tfdist_env"] = env_times
    setup = {
        "data": "scikit-learn digits, 1437 train samples (8x8x1), tfdist's digits pipeline vs "
        "tf.data.from_tensor_slices in the hand-written scripts",
        "per_replica_batch": PER_REPLICA_BATCH,
        "optimizer": "SGD(0.05 x workers, momentum 0.9)",
        "epochs": args.epochs,
        "steps_per_epoch": args.steps_per_epoch,
        "rounds": args.rounds,
        "pinning": "each process on one core (sched_setaffinity, as taskset), "
        "TF_NUM_INTRAOP_THREADS=1, OMP_NUM_THREADS=1",
        "throughput": "global samples/s of rank 0 over epochs 2..E (probe.py timestamps)",
        "memory": "peak RSS (VmHWM) at the end of model.fit, max over the ranks",
        "tfdist_command": "tfdist launch -n N --strategy=S -- tfdist train --strategy=S "
        "--pipeline=digits --model=M",
        "hand_commands": {
            "multi_worker": "RANK=r WORLD_SIZE=N BASE_PORT=p python "
            "bench/baselines/multi_worker_keras.py (one process per rank)",
            "horovod": "horovodrun -np N -H localhost:N --gloo python bench/baselines/"
            "horovod_keras.py",
            "plain": "python bench/baselines/plain_keras.py",
        },
    }
    return {
        "overhead": {
            "benchmark": "overhead",
            "machine": info,
            "setup": setup,
            "results": overhead,
            "configs": configs_summary,
            "raw": [r for r in runs if r["procs"] == 2]
        },
        "weak_scaling": {
            "benchmark": "weak_scaling",
            "machine": info,
            "setup": setup,
            "results": weak,
            "configs": {
                k: v
                for k, v in configs_summary.items() if "resnet_small" in k
            },
            "raw": [r for r in runs if r["model"] == "resnet_small"]
        },
        "startup": {
            "benchmark":
            "startup",
            "machine":
            info,
            "setup":
            setup,
            "results":
            startup,
            "raw": [{
                k: r.get(k)
                for k in ("name", "round", "ok", "process_start_s", "first_step_begin_s",
                          "first_step_end_s")
            } for r in runs if r["procs"] == 2 or r["engine"] == "plain"]
        },
    }


def _diffs(runs: list[dict], a: str, b: str, key: str) -> list[float]:
    ra = {r["round"]: r for r in runs if r["name"] == a and r["ok"]}
    rb = {r["round"]: r for r in runs if r["name"] == b and r["ok"]}
    return [round(ra[i][key] - rb[i][key], 3) for i in sorted(ra) if i in rb]


def _met(values: list, test) -> bool | None:
    import statistics

    values = [v for v in values if v is not None]
    return bool(test(statistics.median(values))) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps_per_epoch", type=int, default=25)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    parser.add_argument("--only", default="", help="comma-separated substrings of config names")
    parser.add_argument("--keep", action="store_true", help="keep the logs and probe files")
    args = parser.parse_args()
    info = machine()
    work = tempfile.mkdtemp(prefix="tfdist-bench-training-")
    todo = configs()
    if args.only:
        todo = [c for c in todo if any(s in c["name"] for s in args.only.split(","))]
    runs = []
    started = time.time()
    for i in range(args.rounds):
        print(f"round {i + 1}/{args.rounds} ({time.time() - started:.0f} s)", flush=True)
        order = list(todo)
        if i % 2:  # alternate who goes first within each tfdist/hand pair
            order = [c for pair in zip(order[1::2], order[0::2])
                     for c in pair] + order[len(order) - len(order) % 2:]
        for cfg in order:
            runs.append(measure(cfg, args, work, i))
    env_times = time_env(repeats=5)
    results = analyse(runs, args, info, env_times)
    for name, result in results.items():
        result["wall_seconds"] = round(time.time() - started, 1)
        result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
        print(f"wrote {write_result(name, result)}", flush=True)
    if args.keep or any(not r["ok"] for r in runs):
        print(f"logs: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
