"""Run a Python program in this process and record, the same way for tfdist and hand-written code,
when its training started, how long each epoch took and its peak memory.

  python bench/probe.py OUT_PREFIX [--pin] [--exit_after_train] -- PROGRAM.py [ARGS...]

Writes OUT_PREFIX.rank<R>.json (R from TFDIST_LAUNCH_RANK, HOROVOD_RANK or RANK) at the end of the
first step (so a driver can read it while the run trains) and at exit. Timestamps are
time.time(), so the driver can subtract its own launch time. The hooks wrap the CallbackList of
tf_keras and of Keras 3 when either is imported (nothing is imported here: the program picks its
Keras); the record's "keras" names the Keras whose fit ran the steps ("tf-keras 2.18.0",
"Keras 3.15.1"), so the driver can check both sides of a comparison trained the same one.

Steps for bench/compare.py's slices: with $BENCH_STEPS_FILE set (an 8-byte file), rank 0 keeps
its count of finished training steps there (little-endian int64, shared memory), which the driver
reads to stop a run right after a step and to count the samples of a slice. The CPU time is read
by the driver, from outside (bench/proctree.py).

--exit_after_train: end the process (status 0) when model.fit returns, so the runs stop paying
for what each program does after training (evaluation, saving). It waits one second first: a rank
that is done with the last collective (all-reduce, or tfdist's epoch-end gather) may still have to
serve its part of it to a peer (TensorFlow's ring pulls buffers over gRPC).

--pin: bind this rank to one core (core = rank mod cores), as `taskset -c CORE` does, and give
TensorFlow one intra-op thread (TF_NUM_INTRAOP_THREADS=1, OMP_NUM_THREADS=1).
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import json
import mmap
import os
import runpy
import struct
import sys
import time

START = time.time()
RANK_VARS = ("TFDIST_LAUNCH_RANK", "HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "RANK")
CALLBACKS_MODULES = ("tf_keras.src.callbacks", "keras.src.callbacks.callback_list")
STEPS_FILE = "BENCH_STEPS_FILE"

record: dict = {
    "probe_start": START,
    "epochs": [],
    "first_step_begin": None,
    "first_step_end": None,
    "keras": None,
}


def rank() -> int:
    for name in RANK_VARS:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def keras_name(module_name: str) -> str:
    """"tf-keras X.Y.Z" or "Keras X.Y.Z": the Keras a CallbackList module belongs to."""
    from importlib import metadata

    package = "tf-keras" if module_name.startswith("tf_keras") else "keras"
    try:
        version = metadata.version(package)
    except metadata.PackageNotFoundError:
        version = "?"
    return f"{'tf-keras' if package == 'tf-keras' else 'Keras'} {version}"


def steps_per_call(model) -> int:
    """The steps one call of `model`'s train function runs (steps_per_execution; Keras 3 runs
    every call in full): Keras 3's int, tf-keras's variable."""
    steps = getattr(model, "_steps_per_execution", None)  # tf-keras
    if steps is not None and hasattr(steps, "numpy"):
        return max(1, int(steps.numpy().item()))
    return max(1, int(getattr(model, "steps_per_execution", 1) or 1))


def patch_callback_list(module) -> None:
    cls = module.CallbackList
    keras = keras_name(module.__name__)
    original = {
        name: getattr(cls, name)
        for name in ("on_train_batch_begin", "on_train_batch_end", "on_epoch_begin", "on_epoch_end",
                     "on_train_end")
    }
    state = {"epoch": None, "calls": 1}

    def on_train_batch_begin(self, batch, logs=None):
        if record["first_step_begin"] is None:
            record["first_step_begin"] = time.time()
            record["keras"] = keras
        return original["on_train_batch_begin"](self, batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        result = original["on_train_batch_end"](self, batch, logs)
        if _steps["map"] is not None:
            _steps["count"] += state["calls"]  # the steps this call ran
            if not _steps["at_epoch_end"]:
                struct.pack_into("<q", _steps["map"], 0, _steps["count"])
        if record["first_step_end"] is None:
            record["first_step_end"] = time.time()
            write()
        return result

    def on_epoch_begin(self, epoch, logs=None):
        state["epoch"] = [time.time(), None]
        state["calls"] = steps_per_call(self.model)
        if record.get("steps_per_call") != state["calls"]:  # e.g. tfdist train's auto count
            record["steps_per_call"] = state["calls"]
            if record["first_step_end"] is not None:
                write()
        return original["on_epoch_begin"](self, epoch, logs)

    def on_epoch_end(self, epoch, logs=None):
        result = original["on_epoch_end"](self, epoch, logs)
        if _steps["map"] is not None and _steps["at_epoch_end"]:
            struct.pack_into("<q", _steps["map"], 0, _steps["count"])
        if state["epoch"] is not None:
            state["epoch"][1] = time.time()
            record["epochs"].append(state["epoch"])
            state["epoch"] = None
        return result

    def on_train_end(self, logs=None):
        result = original["on_train_end"](self, logs)
        record["train_end"] = time.time()
        write()
        if _out["exit_after_train"]:
            time.sleep(1.0)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        return result

    for name, fn in list(locals().items()):
        if name in original:
            setattr(cls, name, fn)


class _Hook(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Patches a Keras's CallbackList right after its module is executed."""

    def __init__(self, module: str):
        self.module = module

    def find_spec(self, fullname, path, target=None):
        if fullname != self.module:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        patch_callback_list(module)
        sys.meta_path.remove(self)


_out = {"path": None, "exit_after_train": False}
# Rank 0's count of finished steps, in the 8 bytes of $BENCH_STEPS_FILE (shared memory: the
# driver of bench/compare.py's alternating slices reads it without a system call on this side).
# Under parameter_server, model.fit only schedules the steps and its callbacks run ahead of the
# work; the epoch's end waits for all of them (coordinator.join): $BENCH_COUNT_AT=epoch publishes
# the count there only.
_steps = {"map": None, "count": 0, "at_epoch_end": os.environ.get("BENCH_COUNT_AT") == "epoch"}


def share_steps(path: str) -> None:
    with open(path, "r+b") as f:
        _steps["map"] = mmap.mmap(f.fileno(), 8)


def write() -> None:
    if _out["path"] is None:
        return
    record["peak_rss_mb"] = round(peak_rss_mb(), 1)
    record["end"] = time.time()
    with open(_out["path"] + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(_out["path"] + ".tmp", _out["path"])


def main() -> None:
    args = sys.argv[1:]
    if "--" not in args or len(args) < 3:
        sys.exit(__doc__)
    split = args.index("--")
    options, program = args[:split], args[split + 1:]
    prefix, pin = options[0], "--pin" in options[1:]
    _out["exit_after_train"] = "--exit_after_train" in options[1:]
    me = rank()
    record["rank"] = me
    if pin:
        cores = sorted(os.sched_getaffinity(0))
        core = cores[me % len(cores)]
        os.sched_setaffinity(0, {core})
        os.environ["TF_NUM_INTRAOP_THREADS"] = "1"
        os.environ["OMP_NUM_THREADS"] = "1"
        record["core"] = core
    _out["path"] = f"{prefix}.rank{me}.json"
    if me == 0 and os.environ.get(STEPS_FILE):
        share_steps(os.environ[STEPS_FILE])
    atexit.register(write)
    for module in CALLBACKS_MODULES:
        sys.meta_path.insert(0, _Hook(module))
    sys.argv = program
    sys.path.insert(0, os.path.dirname(os.path.abspath(program[0])))
    runpy.run_path(program[0], run_name="__main__")


if __name__ == "__main__":
    main()
