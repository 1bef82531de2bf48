"""Horovod's Keras API binds the Keras tf.keras is, whatever the order of the user's imports
(keras_compat.horovod_binding): tf-keras where the user exported TF_USE_LEGACY_KERAS=1, Keras 3
otherwise. Real Horovod, one process, a real `model.fit`."""

import subprocess
import sys

import pytest

from tests.helpers import clean_environ, requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.slow]

# A fit with Horovod's optimizer and callbacks, on the Keras `K` (each case's prefix binds it).
FIT_WITH_HOROVOD = r"""
hvd.init()
K.utils.set_random_seed(0)
model = K.Sequential([K.Input((3,)), K.layers.Dense(1)])
model.compile(optimizer=hvd.DistributedOptimizer(K.optimizers.SGD(0.05, momentum=0.9)), loss="mse")
x = np.random.default_rng(0).normal(size=(64, 3)).astype("float32")
callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0),
             hvd.callbacks.MetricAverageCallback(),
             hvd.callbacks.LearningRateWarmupCallback(initial_lr=0.05, warmup_epochs=2)]
hist = model.fit(x, x.sum(1), batch_size=8, epochs=3, verbose=0, callbacks=callbacks)
assert hist.history["loss"][2] < hist.history["loss"][0], hist.history
assert abs(hist.history["lr"][2] - 0.05) < 1e-6, hist.history["lr"]
print("FIT OK")
"""

FIT = r"""
import numpy as np
import tf_keras as K
import horovod.keras as hk
from horovod.tensorflow.keras import callbacks as hvd_callbacks

assert hvd_callbacks.K is K.backend, hvd_callbacks.K
assert hk.callbacks.K is K.backend, hk.callbacks.K
assert issubclass(hvd.callbacks.MetricAverageCallback, K.callbacks.Callback)
""" + FIT_WITH_HOROVOD

ORDERS = {
    # The order of Horovod's examples, with tfdist's line first.
    "tfdist_first": "import tfdist\nimport horovod.tensorflow.keras as hvd\n",
    # Horovod imported before tfdist (a site wrapper, a user's habit).
    "horovod_first": "import horovod.tensorflow.keras as hvd\nimport tfdist\n",
}


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_horovod_callbacks_bind_tf_keras(order):
    r = subprocess.run([sys.executable, "-c", ORDERS[order] + FIT],
                       env=clean_environ(TF_USE_LEGACY_KERAS="1"),
                       capture_output=True,
                       text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "FIT OK" in r.stdout
    # tf-keras's SGD keeps momentum as a float baked into the traced step: Horovod's momentum
    # correction is skipped, and said so once.
    assert r.stderr.count("momentum correction is skipped") == 1, r.stderr[-3000:]


# The same with tf.keras as TensorFlow makes it by default, Keras 3: Horovod's callbacks are Keras
# 3 callbacks (as Horovod binds them); their Keras 2 parts and the optimizer go to
# tfdist.keras_compat.horovod.
FIT_KERAS3 = r"""
import numpy as np
import keras
import tensorflow as tf

K = tf.keras
assert K.Model is keras.Model
assert issubclass(hvd.callbacks.MetricAverageCallback, keras.callbacks.Callback)
""" + FIT_WITH_HOROVOD


@pytest.mark.newest
def test_horovod_imported_first_binds_keras3_where_tf_keras_is_keras3():
    env = clean_environ()
    env.pop("TF_USE_LEGACY_KERAS", None)
    r = subprocess.run([sys.executable, "-c", ORDERS["horovod_first"] + FIT_KERAS3],
                       env=env,
                       capture_output=True,
                       text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "FIT OK" in r.stdout
