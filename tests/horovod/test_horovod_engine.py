"""The Horovod engine in one process: its optimizer options, Horovod's Keras module bound to
tf-keras (the user's `keras` left as it was), and the engine's optimizer, callbacks, barrier and
shutdown on a real Horovod. Several ranks: test_horovod_train.py."""

import os
import subprocess
import sys

import pytest

from tests.helpers import clean_environ, keras_environ, requires_horovod


def test_optimizer_options_are_checked_first():
    from tfdist.distribute.horovod_engine import check_optimizer_options

    with pytest.raises(ValueError, match="fp16"):
        check_optimizer_options("bf16", 1)
    with pytest.raises(ValueError, match="backward_passes_per_step"):
        check_optimizer_options("none", 0)
    check_optimizer_options("fp16", 2)


ALIASING = r"""
import sys
import tfdist
case = sys.argv[1]
if case == "real":
    import keras  # Keras 3, the user's own
elif case == "fake":
    import types
    sys.modules["keras"] = types.ModuleType("keras")
before = {n: m for n, m in sys.modules.items() if n == "keras" or n.startswith("keras.")}

import numpy as np
import tf_keras
from tfdist.cluster import build_roles, detect
from tfdist.distribute import horovod_setup as hs
from tfdist.distribute.horovod_engine import HorovodEngine

hvd = hs.import_horovod_keras()
after = {n: m for n, m in sys.modules.items() if n == "keras" or n.startswith("keras.")}
assert after.keys() == before.keys(), (sorted(after.keys() ^ before.keys())[:10])
assert all(after[n] is before[n] for n in before)
assert hs.import_horovod_keras() is hvd
# Horovod's Keras callbacks bound tf_keras at import and still use it.
from horovod.tensorflow.keras import callbacks as hvd_callbacks
assert hvd_callbacks.K is tf_keras.backend, hvd_callbacks.K
assert issubclass(hvd.callbacks.MetricAverageCallback, tf_keras.callbacks.Callback)

c = detect()
engine = HorovodEngine(c, build_roles(c, "horovod"), compression="fp16", backward_passes_per_step=2)
hvd = engine.hvd
assert (hvd.rank(), hvd.size()) == (0, 1)
# A second engine of the process finds Horovod initialised: it is checked, not set up again.
assert HorovodEngine(c, build_roles(c, "horovod")).hvd is hvd and hvd.is_initialized()
tf_keras.utils.set_random_seed(0)
model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(3,))])
model.compile(optimizer=engine.wrap_optimizer(tf_keras.optimizers.SGD(0.1)),
              loss="mse", metrics=["mae"])
x = np.random.default_rng(0).normal(size=(32, 3)).astype("float32")
hist = model.fit(x, x.sum(1), batch_size=8, epochs=2, verbose=0, callbacks=engine.callbacks())
assert hist.history["loss"][1] < hist.history["loss"][0], hist.history
engine.barrier()
engine.shutdown()
engine.shutdown()
try:
    engine.callbacks()
except hs.HorovodSetupError as err:
    assert "shut down" in str(err), err
else:
    raise AssertionError("callbacks of a Horovod shut down")
assert {n: m for n, m in sys.modules.items() if n == "keras" or n.startswith("keras.")} == before
print("ALIASING OK", case, sys.modules.get("keras"))
"""


@requires_horovod
@pytest.mark.horovod
@pytest.mark.slow
@pytest.mark.parametrize("case", ["absent", pytest.param("real", marks=pytest.mark.newest), "fake"])
def test_keras_alias_is_undone_and_horovod_callbacks_work(case):
    # tf-keras's binding: tf.keras is tf-keras, as its user exports it (Keras 3's:
    # test_horovod_keras_binding.py).
    r = subprocess.run([sys.executable, "-c", ALIASING, case],
                       env=clean_environ(**keras_environ(2)),
                       capture_output=True,
                       text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert f"ALIASING OK {case}" in r.stdout
    if case == "absent":
        assert r.stdout.strip().endswith("None")
    elif case == "real":
        assert "site-packages/keras/__init__.py" in r.stdout.replace(os.sep, "/")
