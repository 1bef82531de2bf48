"""tfdist: distributed TensorFlow/Keras training on Slurm clusters.

Import tfdist before TensorFlow: it selects tf-keras (Keras 2), the only Keras on which every
strategy of tfdist runs under `model.fit` and Horovod works (docs/compatibility.md), binds
Horovod's Keras API to it whether Horovod is imported before or after, and quiets TensorFlow's
start-up logging (tfdist.logs; TFDIST_VERBOSE=1 shows everything).
"""

from tfdist import logs as _logs
from tfdist import tf_environ as _tf_environ
from tfdist.distribute import horovod_keras as _horovod_keras
from tfdist.errors import TfdistError  # noqa: F401  (the one error type to catch)

# Before TensorFlow loads: TensorFlow reads these when `tf.keras` is first touched.
_tf_environ.apply()
_horovod_keras.install()
_logs.setup()

__version__ = "0.1.0"


def init(*args, **kwargs):
    """Detect the cluster and make the engine: see tfdist.runtime.init."""
    from tfdist.runtime import init as _init

    return _init(*args, **kwargs)
