"""tfdist.keras_compat.user_fit on both Kerases, in a subprocess each (the Keras a process uses
is chosen at its first import): hooks see compile's and fit's arguments by name, positional
ones too, and what they change is what Keras runs with; so do save's and save_weights', whose
Keras method runs inside the context managers a hook adds to `call.around`."""

import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import numpy as np
from tfdist.keras_compat import user_fit
import tensorflow as tf

seen = []
def compile_hook(call):
    seen.append(("compile", sorted(call.arguments)))
    call.arguments["loss"] = "mse"  # the script's "mae" replaced: Keras must run with mse
def fit_hook(call):
    seen.append(("fit", call.get("epochs"), call.get("batch_size"), call.get("verbose")))
    call.arguments["epochs"] = 2
    call.arguments["callbacks"] = list(call.get("callbacks") or []) + [Count()]

class Count(tf.keras.callbacks.Callback):
    epochs = 0
    def on_epoch_end(self, epoch, logs=None):
        Count.epochs += 1

user_fit.on("compile", "t", compile_hook)
user_fit.on("fit", "t", fit_hook)
user_fit.on("fit", "t", fit_hook)  # the same name again: replaced, not run twice
model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
model.compile("sgd", "mae")
x, y = np.ones((8, 3), "float32"), np.zeros((8, 1), "float32")
history = model.fit(x, y, 4, 1, verbose=0)  # batch_size and epochs given by position
print(seen)
print("loss", type(model.loss).__name__ if not isinstance(model.loss, str) else model.loss)
print("epochs", Count.epochs, len(history.history["loss"]))
user_fit.off("fit", "t")
model.fit(x, y, epochs=1, verbose=0)
print("after off", Count.epochs)

import contextlib, os, tempfile
written = []  # (file there when the context is entered, when it is left), per save
@contextlib.contextmanager
def around(path):
    before = os.path.exists(path)
    yield
    written.append((before, os.path.exists(path)))
def save_hook(call):  # save and save_weights: the path the script gave, by name
    call.arguments["filepath"] = call.get("filepath").replace("asked", "written")
    call.around.append(around(call.arguments["filepath"]))
user_fit.on("save", "t", save_hook)
user_fit.on("save_weights", "t", save_hook)
folder = tempfile.mkdtemp()
model.save(os.path.join(folder, "asked.keras"))
model.save_weights(os.path.join(folder, "asked.weights.h5"))
print("saved", sorted(os.listdir(folder)), written)
"""


@pytest.mark.parametrize("legacy", ["0", "1"], ids=["keras3", "tf_keras"])
def test_hooks_change_what_keras_runs(legacy, tmp_path):
    env = {"TF_USE_LEGACY_KERAS": legacy, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run([sys.executable, "-c", SCRIPT],
                         env={
                             **os.environ,
                             **env
                         },
                         capture_output=True,
                         text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    seen = eval(lines[-5])  # noqa: S307 - our own script's repr
    assert seen[0] == ("compile", ["loss", "optimizer"])
    assert seen[1] == ("fit", 1, 4, 0)
    assert len(seen) == 2, seen  # the fit hook registered twice under one name ran once
    assert lines[-4] in ("loss mse", "loss MeanSquaredError"), lines[-4]
    assert lines[-3] == "epochs 2 2"  # the hook's epochs=2 and its callback ran
    assert lines[-2] == "after off 2"  # hook removed: fit as Keras wrote it, no callback added
    # the save hook's paths, not the script's
    # and Keras wrote each file inside the hook's context
    assert lines[-1] == ("saved ['written.keras', 'written.weights.h5'] [(False, True), (False, "
                         "True)]"), lines[-1]
