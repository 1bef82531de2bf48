"""The stop for Keras 3 models under an engine where Keras 3's `model.fit` was not measured.

Which Keras a script uses is the user's: `tf.keras` is what TensorFlow makes it (Keras 3 on
TensorFlow >= 2.16, tf-keras where TF_USE_LEGACY_KERAS=1), and `import keras` is Keras 3."""

import functools

from tfdist.errors import TfdistError
from tfdist.keras3 import keras3_loaded


class KerasVersionError(TfdistError, RuntimeError):
    """A Keras 3 model under an engine where tfdist has not measured Keras 3's fit."""


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
            "and compile it with tf-keras (`export TF_USE_LEGACY_KERAS=1` and `from tensorflow "
            "import keras`), or train with one of the strategies where Keras 3 works: "
            f"{', '.join(KERAS3_ENGINES)}.")

    setattr(guarded_fit, _MARK, True)
    model.fit = guarded_fit
