"""tfdist: distributed TensorFlow/Keras training on Slurm clusters.

`import tfdist` may stand anywhere in a script, before or after `import tensorflow`, `import
keras` or `import horovod.tensorflow.keras`. It keeps the Keras the script uses: `tf.keras` is
what TensorFlow makes it (Keras 3 on TensorFlow >= 2.16, tf-keras where the user exported
TF_USE_LEGACY_KERAS=1). It corrects Keras 3 where its TensorFlow trainer fails under a strategy
(tfdist.keras_compat), binds Horovod's Keras API to tf.keras's Keras whichever was imported first
(tfdist.keras_compat.horovod_binding), and quiets TensorFlow's start-up logging when it comes before
TensorFlow (tfdist.logs; TFDIST_VERBOSE=1 shows everything).
"""

from tfdist import logs as _logs
from tfdist import tf_environ as _tf_environ
from tfdist.keras_compat import horovod_binding as _horovod_binding
from tfdist.errors import TfdistError  # noqa: F401  (the one error type to catch)
from tfdist.import_context import tensorflow_free_import as _tensorflow_free_import
from tfdist.keras_compat import apply as _keras_compat

__version__ = "0.1.0"
_set_up = False


def _set_up_process() -> None:
    """What `import tfdist` does to the process (once)."""
    global _set_up
    if _set_up:
        return
    _set_up = True
    # Read when TensorFlow loads (if it has not yet): its C++ log level.
    _tf_environ.apply()
    _horovod_binding.install()
    _keras_compat.install()  # Keras 3's corrections, whenever Keras is imported
    _logs.setup()


# Not for `import tfdist.cluster` or `python -m tfdist.cli.launch_guard`, which only pass through
# here (tfdist.import_context says how it is told); tfdist.init() sets up a process that imported
# those before `import tfdist`.
if not _tensorflow_free_import():
    _set_up_process()


def init(*args, **kwargs):
    """Detect the cluster and make the engine: see tfdist.runtime.init."""
    from tfdist.runtime import init as _init

    return _init(*args, **kwargs)
