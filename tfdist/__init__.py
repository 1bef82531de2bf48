"""tfdist: distributed TensorFlow/Keras training on Slurm clusters.

Import tfdist before TensorFlow: it selects tf-keras (Keras 2), the only Keras on which every
strategy of tfdist runs under `model.fit` and Horovod works (shared/design/FACTS.md).
"""

import os

# TensorFlow reads this when `tf.keras` is first touched; it must be set before that happens.
os.environ["TF_USE_LEGACY_KERAS"] = "1"
# Batch logs stay readable: TensorFlow's C++ INFO lines (oneDNN notes, end-of-data notes) are hidden
# unless the user asks for them.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

__version__ = "0.1.0"


def init(*args, **kwargs):
    """Detect the cluster and make the engine: see tfdist.runtime.init."""
    from tfdist.runtime import init as _init

    return _init(*args, **kwargs)
