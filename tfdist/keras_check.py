"""The check that tf.keras really is tf-keras (Keras 2) in this process."""

import sys


class KerasVersionError(RuntimeError):
    """TensorFlow was set up with Keras 3 before tfdist could select tf-keras."""


def require_legacy_keras():
    """Return tf.keras after checking that it is tf-keras; raise KerasVersionError if not."""
    import tensorflow as tf

    package = tf.keras.Model.__module__.split(".")[0]  # "tf_keras", or "keras" for Keras 3
    version = getattr(sys.modules.get(package), "__version__", "unknown")
    if package != "tf_keras":
        raise KerasVersionError(
            f"tf.keras is Keras {version} in this process, but tfdist needs tf-keras 2.x "
            "(under Keras 3, MultiWorkerMirrored and ParameterServer model.fit and Horovod's Keras "
            "API fail). TensorFlow was imported and tf.keras used before `import tfdist` (and "
            "without TF_USE_LEGACY_KERAS=1 in the environment). Fix: put `import tfdist` before "
            "`import tensorflow` and `import keras` in "
            "your script, or `export TF_USE_LEGACY_KERAS=1` before starting Python.")
    return tf.keras
