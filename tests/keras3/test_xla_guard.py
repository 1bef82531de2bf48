"""tfdist.keras_compat.xla_guard's decisions, in a Keras 3 process: `compile` reports Keras 3's
"auto" turned off by the strategy once per model, for a model under the strategy compiled without
a choice of its own (the engine's GPUs are told to `expect`: this machine has none); `fit` stops a
model compiled with `jit_compile=True` where the engine gave a reason, before any step. The
engines' reasons and a real run: tests/distribute/test_two_lines.py::test_mirrored_on_two_devices
(and docs/benchmarks.md#xla for every engine)."""

import subprocess
import sys

SCRIPT = r"""
import logging
import numpy as np
import keras
import tensorflow as tf
from tfdist.keras_compat import xla_guard

said = []
class Keep(logging.Handler):
    def emit(self, record):
        said.append(record.getMessage())
logging.getLogger("tfdist").addHandler(Keep())
logging.getLogger("tfdist").setLevel(logging.INFO)

def make():
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)], name="small")

xla_guard.expect("--strategy=mirrored, 1 task, 2 replicas in sync", None, True, True)
strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
with strategy.scope():
    under, chosen = make(), make()
under.compile("sgd", "mse")
under.compile("sgd", "mse")  # the same model again: said once
chosen.compile("sgd", "mse", jit_compile=False)  # the script's own choice: nothing to say
outside = make()
outside.compile("sgd", "mse")  # outside the strategy: Keras decides as on one device
print("said", len(said))
print(said[0] if said else "")

xla_guard.expect("--strategy=mirrored, 1 task, 2 replicas in sync", "the reason", True, False)
with strategy.scope():
    model = make()
model.compile("sgd", "mse", jit_compile=True)
steps = []
class Count(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        steps.append(batch)
try:
    model.fit(np.ones((8, 3), "float32"), np.zeros((8, 1), "float32"), epochs=1, verbose=0,
              callbacks=[Count()])
except xla_guard.XlaUnderStrategy as err:
    print("refused", err)
print("steps", len(steps))
model.compile("sgd", "mse", jit_compile=False)
model.fit(np.ones((8, 3), "float32"), np.zeros((8, 1), "float32"), epochs=1, verbose=0,
          callbacks=[Count()])
print("steps without XLA", len(steps))
"""


def test_auto_reported_once_and_xla_refused_before_a_step():
    r = subprocess.run([sys.executable, "-c", SCRIPT],
                       capture_output=True,
                       text=True,
                       env={
                           "TF_CPP_MIN_LOG_LEVEL": "2",
                           "PATH": "/usr/bin:/bin"
                       },
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert "said 1" in lines, r.stdout
    assert ('Keras 3 compiles Sequential without XLA: its jit_compile="auto" is off under any '
            "tf.distribute strategy (on one GPU it would be on). tfdist keeps that choice: XLA "
            "under --strategy=mirrored, 1 task, 2 replicas in sync is not measured by tfdist "
            "(docs/benchmarks.md#xla); `model.compile(..., jit_compile=True)` asks for it."
            in lines), r.stdout
    assert ("refused Sequential is compiled with jit_compile=True (XLA), which cannot train under "
            "--strategy=mirrored, 1 task, 2 replicas in sync: the reason. Fix: compile without "
            "it" in r.stdout), r.stdout
    assert "steps 0" in lines and "steps without XLA 1" in lines, r.stdout
