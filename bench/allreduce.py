"""Benchmark 2: gradient all-reduce between 2 processes on loopback vs the wire (plain TCP).

  .venv/bin/python bench/allreduce.py [--repeats=5] [--passes=1]

Measured in one run:
- the limit: plain TCP throughput over 127.0.0.1 between two processes (one stream, 256 MB a
  push, a few pushes between the engine runs);
- MultiWorkerMirrored collectives (tfdist's multi_worker engine, RING on CPU) with a sweep of
  bytes_per_pack (tfdist's default of 16 MB, TensorFlow's 0, 8, 32, 64 MB), each setting its
  own pair of processes;
- Horovod gloo (tfdist's horovod engine) with a sweep of HOROVOD_FUSION_THRESHOLD (unset = tfdist's
  default, i.e. Horovod's 64 MB), and fp16 compression at the default threshold (lossy: reported
  beside the sweep, not in it);
on single float32 tensors of 1, 25 and 100 MB and on the gradient list of ResNet-50 (the shapes of
`tf.keras.applications.ResNet50(weights=None)`'s trainable variables, nothing trained). One
all-reduce is timed on rank 0 after a barrier; bus bandwidth = bytes x 2(n-1)/n / time, which
for n = 2 is bytes / time. Sweep settings other than the defaults only change how several
tensors are grouped, so they are measured on the ResNet-50 list only. Writes
bench/results/allreduce.json.

Worker mode (started by the driver through `tfdist launch -n 2`):
  python bench/allreduce.py --worker --engine=multi_worker|horovod [--bytes_per_pack=N] --out=F
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BIN, end_children_on_signals, machine, quiet_env, ratio  # noqa: E402
from common import run, summary, write_result  # noqa: E402

MB = 2**20
SIZES_MB = (1, 25, 100)
# None: tfdist's default (nothing passed; 16 MB since bench/allreduce.py measured it); 0 is
# TensorFlow's own default (all gradients in one pack).
PACK_SWEEP = (None, 0, 8 * MB, 32 * MB, 64 * MB)
FUSION_SWEEP = (None, 0, 16 * MB, 128 * MB)  # None: tfdist's default (Horovod's 64 MB)
DEFAULTS = {"multi_worker": None, "horovod": None}
TCP_BYTES = 256 * MB

# ----------------------------------------------------------------------------------------------
# Worker


def resnet50_shapes(cache: str = "") -> list:
    """The shapes of ResNet-50's trainable variables (built once, then read from `cache`)."""
    if cache and os.path.exists(cache):
        with open(cache) as f:
            return [tuple(s) for s in json.load(f)]
    import tensorflow as tf

    model = tf.keras.applications.ResNet50(weights=None)
    shapes = [tuple(v.shape) for v in model.trainable_variables]
    if cache:
        with open(cache + f".{os.getpid()}", "w") as f:
            json.dump(shapes, f)
        os.replace(cache + f".{os.getpid()}", cache)
    return shapes


def worker(args) -> None:
    import tfdist
    import tensorflow as tf

    options = {}
    if args.engine == "multi_worker" and args.bytes_per_pack >= 0:
        options["bytes_per_pack"] = args.bytes_per_pack
    rt = tfdist.init(strategy=args.engine, **options)
    effective = {}
    if args.engine == "multi_worker":
        from tfdist.distribute.defaults import DEFAULT_BYTES_PER_PACK

        effective["bytes_per_pack"] = options.get("bytes_per_pack", DEFAULT_BYTES_PER_PACK)
    else:
        effective["HOROVOD_FUSION_THRESHOLD"] = os.environ.get("HOROVOD_FUSION_THRESHOLD")
    shapes = resnet50_shapes(args.shapes_cache)
    # Packing and fusion only group several tensors: a sweep setting other than the default is
    # measured on the gradient list alone.
    sizes = () if args.list_only else SIZES_MB
    cases = {f"{mb}MB": [tf.ones([mb * MB // 4], tf.float32)] for mb in sizes}
    cases["resnet50"] = [tf.ones(s, tf.float32) for s in shapes]
    compressions = ["none"]

    if args.engine == "multi_worker":
        strategy = rt.strategy

        def make(name, compression):

            @tf.function
            def allreduce(tensors):

                def step(ts):
                    # Placed on this replica's device, as gradients are (tf.function inputs have
                    # none, and the collective then has no destination).
                    ts = [tf.identity(t) for t in ts]
                    ctx = tf.distribute.get_replica_context()
                    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, ts)

                return strategy.run(step, args=(tensors, ))

            return allreduce
    else:
        import horovod.tensorflow as hvd

        if args.fp16:
            compressions.append("fp16")

        def make(name, compression):
            codec = getattr(hvd.Compression, compression)

            @tf.function
            def allreduce(tensors):
                # One op per tensor, all in one graph, as DistributedOptimizer issues gradients:
                # Horovod's tensor fusion batches them up to HOROVOD_FUSION_THRESHOLD.
                return [
                    hvd.allreduce(t,
                                  op=hvd.Sum,
                                  compression=codec,
                                  name=f"{name}_{compression}_{i}") for i, t in enumerate(tensors)
                ]

            return allreduce

    results = {}
    for name, tensors in cases.items():
        nbytes = sum(int(t.shape.num_elements()) * 4 for t in tensors)
        for compression in compressions:
            if compression != "none" and name in ("1MB", "25MB"):
                continue
            fn = make(name, compression)
            fn(tensors)  # trace and warm up
            times = []
            for _ in range(args.repeats + (2 if nbytes <= MB else 0)):
                rt.barrier()
                start = time.perf_counter()
                out = fn(tensors)
                tf.nest.flatten(out)[0].numpy()
                times.append(time.perf_counter() - start)
            results[f"{name}/{compression}"] = {
                "bytes": nbytes,
                "tensors": len(tensors),
                "seconds": [round(t, 5) for t in times],
            }
    rt.barrier()
    if rt.rank == 0:
        with open(args.out, "w") as f:
            json.dump(
                {
                    "results": results,
                    "resnet50_variables": len(shapes),
                    "effective": effective
                }, f)
    rt.shutdown()


# ----------------------------------------------------------------------------------------------
# The wire


def _recv_exactly(conn, view, total: int) -> bool:
    got = 0
    while got < total:
        n = conn.recv_into(view)
        if not n:
            return False
        got += n
    return True


def _send(conn, chunk, total: int) -> None:
    for _ in range(total // len(chunk)):
        conn.sendall(chunk)


def _tcp_peer(port: int, total: int, repeats: int, duplex: bool, ready) -> None:
    with socket.create_server(("127.0.0.1", port)) as server:
        ready.set()
        conn, _ = server.accept()
        with conn:
            view = memoryview(bytearray(4 * MB))
            chunk = memoryview(bytearray(4 * MB))
            for _ in range(repeats):
                sender = None
                if duplex:
                    sender = threading.Thread(target=_send, args=(conn, chunk, total))
                    sender.start()
                if not _recv_exactly(conn, view, total):
                    return
                if sender is not None:
                    sender.join()
                conn.sendall(b"k")


def merge(raw: dict, key: str, data: dict) -> None:
    """Pool a pass's timings into raw[key] (a pass that failed makes the setting fail)."""
    if key not in raw:
        raw[key] = dict(data, passes=1)
        return
    into = raw[key]
    into["passes"] += 1
    into["ok"] = into.get("ok", False) and data.get("ok", False)
    into["wall_seconds"] = into.get("wall_seconds", 0) + data.get("wall_seconds", 0)
    for case, entry in data.get("results", {}).items():
        into.setdefault("results", {}).setdefault(case, dict(entry, seconds=[]))
        into["results"][case]["seconds"] += entry["seconds"]


def tcp_limit(repeats: int, duplex: bool = False) -> dict:
    """Seconds to push TCP_BYTES through one loopback stream to another process (and get a
    one-byte acknowledgement back), `repeats` times. duplex: both processes send TCP_BYTES to
    each other at the same time, as the two ranks of a ring all-reduce do (rate per direction)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    peer = ctx.Process(target=_tcp_peer, args=(port, TCP_BYTES, repeats + 1, duplex, ready))
    peer.start()
    ready.wait(30)
    chunk = memoryview(bytearray(4 * MB))
    view = memoryview(bytearray(4 * MB))
    times = []
    with socket.create_connection(("127.0.0.1", port)) as conn:
        for i in range(repeats + 1):
            start = time.perf_counter()
            if duplex:
                sender = threading.Thread(target=_send, args=(conn, chunk, TCP_BYTES))
                sender.start()
                _recv_exactly(conn, view, TCP_BYTES)
                sender.join()
            else:
                _send(conn, chunk, TCP_BYTES)
            conn.recv(1)
            if i:  # the first is a warm-up
                times.append(time.perf_counter() - start)
    peer.join(30)
    rates = [TCP_BYTES / t / 1e9 for t in times]
    return {
        "bytes": TCP_BYTES,
        "seconds": [round(t, 4) for t in times],
        "gb_per_s": summary(rates, 3),
    }


# ----------------------------------------------------------------------------------------------
# Driver


def run_engine(engine: str, setting, args, work: str) -> dict:
    out = os.path.join(work, f"{engine}-{setting}.json")
    log = os.path.join(work, f"{engine}-{setting}.log")
    env = quiet_env()
    extra = [f"--shapes_cache={os.path.join(work, 'resnet50_shapes.json')}"]
    if setting != DEFAULTS[engine]:
        extra.append("--list_only")
    if engine == "multi_worker" and setting is not None:
        extra.append(f"--bytes_per_pack={setting}")
    elif setting is not None:
        env["HOROVOD_FUSION_THRESHOLD"] = str(setting)
    else:
        extra.append("--fp16")  # compression at tfdist's default threshold only
    command = [
        os.path.join(BIN,
                     "tfdist"), "launch", "--nproc=2", f"--strategy={engine}", "--", sys.executable,
        os.path.abspath(__file__), "--worker", f"--engine={engine}", f"--out={out}",
        f"--repeats={args.repeats}"
    ] + extra
    status, seconds = run(command, timeout=args.timeout, env=env, log=log)
    if status != 0 or not os.path.exists(out):
        print(f"  {engine} {setting}: FAILED (status {status}, see {log})", flush=True)
        return {"ok": False, "status": status, "log": log}
    with open(out) as f:
        data = json.load(f)
    data.update(ok=True, wall_seconds=round(seconds, 1))
    return data


def bandwidth(entry: dict) -> dict:
    """Bus bandwidth (n = 2: bytes / seconds) of each sample, in GB/s, and its summary."""
    rates = [entry["bytes"] / t / 1e9 for t in entry["seconds"]]
    return {"gb_per_s": summary(rates, 4), "ms": summary([t * 1e3 for t in entry["seconds"]], 2)}


def label(engine: str, setting) -> str:
    if engine == "multi_worker":
        if setting is None:
            return "default (tfdist)"
        return "bytes_per_pack=0 (TF's)" if setting == 0 else f"bytes_per_pack={setting // MB}MB"
    if setting is None:
        return "default (fusion 64MB)"
    return f"fusion={setting // MB}MB" if setting else "fusion off"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--engine", default="multi_worker")
    parser.add_argument("--bytes_per_pack", type=int, default=-1, help="-1: tfdist's default")
    parser.add_argument("--fp16", action="store_true", help="worker: also with fp16 compression")
    parser.add_argument("--list_only", action="store_true", help="worker: ResNet-50 list only")
    parser.add_argument("--shapes_cache", default="", help="worker: ResNet-50 shapes file")
    parser.add_argument("--out", default="")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--packs", default="", help="bytes_per_pack sweep in MB, e.g. default,0,16")
    parser.add_argument("--passes", type=int, default=1, help="runs of each setting, pooled")
    parser.add_argument("--sweep", default="", help="comma-separated engines (default both)")
    args = parser.parse_args()
    end_children_on_signals()  # ended (SIGTERM, Ctrl-C): no measured run is left behind
    if args.worker:
        worker(args)
        return

    started = time.time()
    info = machine()
    work = tempfile.mkdtemp(prefix="tfdist-bench-allreduce-")
    # The limit is measured between the engine runs (a few pushes before each), so it meets the
    # same load from other processes as the all-reduces do.
    tcp, duplex = [tcp_limit(2)], [tcp_limit(2, duplex=True)]
    packs = PACK_SWEEP
    if args.packs:
        packs = [None if x == "default" else int(x) * MB for x in args.packs.split(",")]
    sweeps = {"multi_worker": packs, "horovod": FUSION_SWEEP}
    raw, table = {}, {}
    for engine, settings in sweeps.items():
        if args.sweep and engine not in args.sweep.split(","):
            continue
        # Passes alternate the order of the settings, so a slow stretch of a shared machine does
        # not land on one setting only; each setting's samples are pooled over the passes.
        for p in range(args.passes):
            for setting in settings if p % 2 == 0 else settings[::-1]:
                print(
                    f"{engine} {label(engine, setting)} pass {p + 1}/{args.passes} "
                    f"({time.time() - started:.0f} s)",
                    flush=True)
                data = run_engine(engine, setting, args, work)
                tcp.append(tcp_limit(2))
                duplex.append(tcp_limit(2, duplex=True))
                merge(raw, f"{engine}/{label(engine, setting)}", data)
        for setting in settings:
            data = raw.get(f"{engine}/{label(engine, setting)}", {})
            if not data.get("ok"):
                continue
            for case, entry in data["results"].items():
                name, compression = case.split("/")
                key = label(engine, setting) + (" + fp16" if compression == "fp16" else "")
                table.setdefault(name, {}).setdefault(engine, {})[key] = bandwidth(entry)
    limit_samples = [TCP_BYTES / t / 1e9 for entry in tcp for t in entry["seconds"]]
    limit = summary(limit_samples, 3)["median"]
    duplex_samples = [TCP_BYTES / t / 1e9 for entry in duplex for t in entry["seconds"]]
    duplex_limit = summary(duplex_samples, 3)["median"]

    verdicts = {}
    for name, engines in table.items():
        for engine, settings in engines.items():
            for key, bw in settings.items():
                bw["ratio_to_tcp_limit"] = ratio(bw["gb_per_s"]["median"], limit)
                bw["ratio_to_tcp_duplex"] = ratio(bw["gb_per_s"]["median"], duplex_limit)
            lossless = {k: v for k, v in settings.items() if "fp16" not in k}
            default = next((k for k in lossless if k.startswith("default")), None)
            if default is None or len(lossless) < 2:
                continue  # a single tensor: measured at the default only
            best = max(lossless, key=lambda k: lossless[k]["gb_per_s"]["median"] or 0)
            default_over_best = ratio(lossless[default]["gb_per_s"]["median"],
                                      lossless[best]["gb_per_s"]["median"])
            verdicts.setdefault(name, {})[engine] = {
                "default": default,
                "best": best,
                "default_gb_per_s": lossless[default]["gb_per_s"]["median"],
                "best_gb_per_s": lossless[best]["gb_per_s"]["median"],
                "default_over_best": default_over_best,
                "goal": "default >= 0.95 x best setting of the sweep (lossless settings)",
                "met": default_over_best is not None and default_over_best >= 0.95,
            }
    best_100 = None
    if "100MB" in table:
        candidates = [(bw["gb_per_s"]["median"] or 0, f"{engine} {key}")
                      for engine, settings in table["100MB"].items()
                      for key, bw in settings.items() if "fp16" not in key]
        if candidates:
            gbps, who = max(candidates)
            best_100 = {
                "setting": who,
                "gb_per_s": gbps,
                "ratio_to_tcp_limit": ratio(gbps, limit),
                "ratio_to_tcp_duplex": ratio(gbps, duplex_limit),
                "goal": "best engine >= 0.40 x loopback TCP on 100 MB",
                "met": bool(limit) and gbps / limit >= 0.40,
            }
    result = {
        "benchmark": "allreduce",
        "machine": info,
        "setup": {
            "processes":
            2,
            "transport":
            "loopback (tfdist launch -n 2 on one machine)",
            "bus_bandwidth":
            "bytes x 2(n-1)/n / seconds = bytes / seconds for n = 2",
            "repeats":
            args.repeats,
            "passes":
            args.passes,
            "sizes_mb":
            list(SIZES_MB),
            "resnet50":
            "trainable variables of tf.keras.applications.ResNet50(weights=None)",
            "multi_worker":
            "tfdist.init(strategy='multi_worker', bytes_per_pack=N); "
            "replica_context.all_reduce(SUM, list) in a tf.function (RING on CPU)",
            "horovod":
            "tfdist.init(strategy='horovod') with HOROVOD_FUSION_THRESHOLD=N; one "
            "horovod.tensorflow.allreduce per tensor in a tf.function",
        },
        "tcp_limit_gb_per_s": limit,
        "tcp_duplex_gb_per_s": duplex_limit,
        "tcp": {
            "gb_per_s":
            summary(limit_samples, 3),
            "samples_gb_per_s": [round(x, 3) for x in limit_samples],
            "note":
            "one stream, 256 MB a push; 2 pushes before the first engine run and after "
            "each; the limit is their median",
            "duplex_gb_per_s":
            summary(duplex_samples, 3),
            "duplex_samples_gb_per_s": [round(x, 3) for x in duplex_samples],
            "duplex_note":
            "both processes send 256 MB to each other at once (rate per "
            "direction): what each rank of a 2-rank ring all-reduce needs",
        },
        "bandwidth": table,
        "defaults_vs_best": verdicts,
        "best_on_100MB": best_100,
        "raw": raw,
        "wall_seconds": round(time.time() - started, 1),
    }
    print(f"wrote {write_result('allreduce', result)}", flush=True)
    print(
        json.dumps(
            {
                "tcp_limit_gb_per_s": limit,
                "tcp_duplex_gb_per_s": duplex_limit,
                "defaults_vs_best": verdicts,
                "best_on_100MB": best_100
            },
            indent=2))


if __name__ == "__main__":
    main()
