"""tfdist: distributed TensorFlow/Keras training on Slurm clusters.

Import tfdist before TensorFlow: it selects tf-keras (Keras 2), the only Keras on which every
strategy of tfdist runs under `model.fit` and Horovod works (shared/design/FACTS.md), and quiets
TensorFlow's start-up logging (tfdist.logs; TFDIST_VERBOSE=1 shows everything).
"""

import os

from tfdist import logs as _logs
from tfdist.errors import TfdistError  # noqa: F401  (the one error type to catch)

# TensorFlow reads this when `tf.keras` is first touched; it must be set before that happens.
os.environ["TF_USE_LEGACY_KERAS"] = "1"
_logs.setup()

__version__ = "0.1.0"


def init(*args, **kwargs):
    """Detect the cluster and make the engine: see tfdist.runtime.init."""
    from tfdist.runtime import init as _init

    return _init(*args, **kwargs)
