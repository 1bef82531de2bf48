"""Horovod's Keras API binds tf-keras whatever the order of the user's imports
(tfdist.distribute.horovod_keras): real Horovod, one process, a real `model.fit`."""

import subprocess
import sys

import pytest

from tests.horovod.helpers import clean_environ, requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.slow]

FIT = r"""
import logging
import numpy as np
import tf_keras
import horovod.keras as hk
from horovod.tensorflow.keras import callbacks as hvd_callbacks

assert hvd_callbacks.K is tf_keras.backend, hvd_callbacks.K
assert hk.callbacks.K is tf_keras.backend, hk.callbacks.K
assert issubclass(hvd.callbacks.MetricAverageCallback, tf_keras.callbacks.Callback)
hvd.init()
tf_keras.utils.set_random_seed(0)
model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(3,))])
model.compile(optimizer=hvd.DistributedOptimizer(tf_keras.optimizers.SGD(0.05, momentum=0.9)),
              loss="mse")
x = np.random.default_rng(0).normal(size=(64, 3)).astype("float32")
callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0),
             hvd.callbacks.MetricAverageCallback(),
             hvd.callbacks.LearningRateWarmupCallback(initial_lr=0.05, warmup_epochs=2)]
hist = model.fit(x, x.sum(1), batch_size=8, epochs=3, verbose=0, callbacks=callbacks)
assert hist.history["loss"][2] < hist.history["loss"][0], hist.history
assert abs(hist.history["lr"][2] - 0.05) < 1e-6, hist.history["lr"]
print("FIT OK")
"""

ORDERS = {
    # The order of Horovod's examples, with tfdist's line first.
    "tfdist_first": "import tfdist\nimport horovod.tensorflow.keras as hvd\n",
    # Horovod imported before tfdist (a site wrapper, a user's habit); the environment of
    # `tfdist launch`, srun after `tfdist env`, or jobs/ carries TF_USE_LEGACY_KERAS=1.
    "horovod_first": "import horovod.tensorflow.keras as hvd\nimport tfdist\n",
}


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_horovod_callbacks_bind_tf_keras(order):
    env = clean_environ(TF_USE_LEGACY_KERAS="1")
    if order == "tfdist_first":
        env.pop("TF_USE_LEGACY_KERAS")  # `import tfdist` sets it
    r = subprocess.run([sys.executable, "-c", ORDERS[order] + FIT],
                       env=env,
                       capture_output=True,
                       text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "FIT OK" in r.stdout
    # tf-keras's SGD keeps momentum as a float baked into the traced step: Horovod's momentum
    # correction is skipped, and said so once.
    assert r.stderr.count("momentum correction is skipped") == 1, r.stderr[-3000:]


def test_horovod_that_made_tf_keras_keras3_is_refused_with_the_fix():
    """Horovod imported first without the switch made tf.keras Keras 3 for good: tfdist.init says
    what to do instead of a crash in the first epoch."""
    env = clean_environ()
    env.pop("TF_USE_LEGACY_KERAS", None)
    script = ("import horovod.tensorflow.keras as hvd\nimport tfdist\n"
              "tfdist.init(strategy='horovod')\n")
    r = subprocess.run([sys.executable, "-c", script],
                       env=env,
                       capture_output=True,
                       text=True,
                       timeout=300)
    assert r.returncode != 0
    assert "KerasVersionError" in r.stderr, r.stderr[-3000:]
    assert "import tfdist" in r.stderr and "TF_USE_LEGACY_KERAS=1" in r.stderr
