"""The check that tf.keras really is tf-keras (Keras 2) in this process, and the stop for Keras 3
models under the strategies where Keras 3's `model.fit` does not work yet."""

import functools
import sys

from tfdist.errors import TfdistError
from tfdist.keras3 import keras3_loaded


class KerasVersionError(TfdistError, RuntimeError):
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
            "without TF_USE_LEGACY_KERAS=1 in the environment), for example by `import "
            "horovod.tensorflow.keras`. Fix: put `import tfdist` before `import tensorflow`, "
            "`import horovod...` and `import keras` in your script, or `export "
            "TF_USE_LEGACY_KERAS=1` before starting Python.")
    return tf.keras


# Engines under which a Keras 3 model trains with model.fit (tools/keras3_matrix.py): Mirrored and
# CentralStorage as Keras ships; MultiWorkerMirrored with tfdist.keras3's corrections; Horovod
# with tfdist.keras3.horovod's optimizer and callbacks; ParameterServer with tfdist.keras3.
# parameter_server's coordinator-driven fit. Engines not measured are refused.
KERAS3_ENGINES = ("default", "one_device", "mirrored", "central_storage", "multi_worker", "horovod",
                  "parameter_server")
_MARK = "_tfdist_keras3_guard"


def guard_keras3_fit(engine_name: str) -> None:
    """Make Keras 3's Model.fit stop at once, naming the fix, under an engine where it fails.

    Called by tfdist.init, and again when Keras 3 is imported after it (tfdist's import hook)."""
    keras = keras3_loaded()
    if keras is None or engine_name in KERAS3_ENGINES:
        return
    model = keras.Model
    if getattr(model.fit, _MARK, False):
        return
    fit = model.fit

    @functools.wraps(fit)
    def guarded_fit(self, *args, **kwargs):
        raise KerasVersionError(
            f"This model is a Keras {keras.__version__} model (`import keras`), and Keras 3's "
            f"model.fit was not measured under --strategy={engine_name} with tfdist. Fix: build "
            "and compile it with `tf.keras` (tf-keras under tfdist): replace `import keras` by "
            "`from tensorflow import keras`; or train with one of the strategies where Keras 3 "
            f"works: {', '.join(KERAS3_ENGINES)}.")

    setattr(guarded_fit, _MARK, True)
    model.fit = guarded_fit
