"""XLA benchmark: the bench models (the digits CNN and resnet_small, 32 samples a step) trained
on one device with `jit_compile=True` against `False`, both Kerases (a process each), in CPU
seconds per sample and samples/s.

  .venv/bin/python bench/xla.py [--rounds=7] [--steps=60]

The two models of a row (the same architecture, compiled on and off) train in one process in
alternating slices of --steps steps (on off, off on, ...) after a warm-up epoch each (XLA
compiles there), so load from elsewhere falls on both alike; each row is the median per-round
ratio with its bootstrap 95 % interval (bench/compare.py's). Under a distribution strategy XLA
does not run on this kind of machine at all: tfdist stops such a fit with each engine's reason
(tfdist.keras_compat.xla_guard; docs/benchmarks.md#xla), so there is nothing to time there.

Prints one JSON object and writes it to bench/results/xla.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import machine, quiet_env, write_result  # noqa: E402
from compare import interval  # noqa: E402
from training import KERAS_ROW  # noqa: E402
from training import PER_REPLICA_BATCH as BATCH  # noqa: E402  (samples a step)

MODELS = ("cnn", "resnet_small")


def measure(keras_version: int, rounds: int, steps: int) -> list[dict]:
    """In this process (its Keras chosen by the caller's TF_USE_LEGACY_KERAS): the per-round
    ratios, XLA on over off, of each model."""
    from sklearn.datasets import load_digits

    import tfdist  # noqa: F401  (before TensorFlow)
    import tensorflow as tf
    from tfdist.app.models import build_model
    from tfdist.keras_compat import keras_module

    keras = keras_module(keras_version)
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32").reshape(-1, 8, 8, 1)
    data = tf.data.Dataset.from_tensor_slices(
        (x, y)).repeat().shuffle(2048, seed=1).batch(BATCH, drop_remainder=True).prefetch(2)
    rows = []
    for name in MODELS:
        models = {}
        for jit in (True, False):
            keras.utils.set_random_seed(1)
            model = build_model(name, (8, 8, 1), 10, keras)
            model.compile(optimizer=keras.optimizers.SGD(0.01),
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          jit_compile=jit)
            model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0)  # compiles (XLA too)
            assert bool(model.jit_compile) is jit, (name, jit, model.jit_compile)
            models[jit] = model
        cpu, rate = [], []
        for i in range(rounds):
            took = {}
            for jit in ((True, False) if i % 2 == 0 else (False, True)):
                wall, used = time.perf_counter(), time.process_time()
                models[jit].fit(data, epochs=1, steps_per_epoch=steps, verbose=0)
                took[jit] = (time.perf_counter() - wall, time.process_time() - used)
            cpu.append(round(took[True][1] / took[False][1], 4))
            rate.append(round(took[False][0] / took[True][0], 4))
        median, low, high = interval(cpu)
        rows.append(
            dict(name=f"{name}/{KERAS_ROW[keras_version]}",
                 model=name,
                 keras=KERAS_ROW[keras_version],
                 cpu_per_sample=dict(median=median, low=low, high=high, rounds=cpu),
                 samples_per_sec=dict(median=interval(rate)[0], rounds=rate),
                 steps_per_slice=steps,
                 batch=BATCH))
        print(
            f"{rows[-1]['name']}: XLA on / off, CPU per sample {median:.2f} "
            f"[{low:.2f}, {high:.2f}], samples/s {rows[-1]['samples_per_sec']['median']:.2f}",
            file=sys.stderr,
            flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=60, help="steps of each slice")
    parser.add_argument("--keras", type=int, default=0, help=argparse.SUPPRESS)  # one process's
    args = parser.parse_args()
    if args.keras:
        print(json.dumps(measure(args.keras, args.rounds, args.steps)))
        return
    rows = []
    for keras in (3, 2):
        env = quiet_env(TF_USE_LEGACY_KERAS="1" if keras == 2 else "0")
        out = subprocess.run([
            sys.executable,
            os.path.abspath(__file__), f"--keras={keras}", f"--rounds={args.rounds}",
            f"--steps={args.steps}"
        ],
                             env=env,
                             stdout=subprocess.PIPE,
                             text=True,
                             check=True).stdout
        rows += json.loads(out.strip().splitlines()[-1])
    result = dict(machine=machine(),
                  setup=dict(rounds=args.rounds, steps_per_slice=args.steps, batch=BATCH),
                  rows=rows)
    write_result("xla", result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
