"""Keras 3 (`import keras`) under tfdist: what kind of Keras an object belongs to, and every
correction tfdist makes to Keras 3 so that its models train under each strategy.

One module per correction area, each tied to the Keras versions it was measured on and applied
when Keras 3 is imported (before or after tfdist). Engines and callbacks ask `is_keras3(...)`
here; they never test Keras versions themselves.
"""

import sys


def keras3_loaded():
    """The Keras 3 module when this process imported it (tfdist and TensorFlow never do)."""
    keras = sys.modules.get("keras")
    version = getattr(keras, "__version__", "")
    return keras if version.startswith("3.") else None


def is_keras3(obj) -> bool:
    """True when `obj` (a model, layer, optimizer or callback, or its class) is a Keras 3 one."""
    cls = obj if isinstance(obj, type) else type(obj)
    if keras3_loaded() is None:
        return False
    return any(c.__module__.split(".")[0] == "keras" for c in cls.__mro__)


def train_counter(model):
    """The variable counting the training steps that `model`'s current fit has completed (from 0,
    incremented after each step's outputs, so a step waiting for its batch is not counted):
    tf-keras's own `_train_counter`; for a Keras 3 model under parameter servers, the one
    tfdist's coordinator-driven fit keeps. None where there is none. Not the optimizer's
    counter: a train_step that steps optimizers of its own (a GAN) never moves that one."""
    if is_keras3(model):
        from tfdist.keras3.parameter_server import train_counter as keras3_counter

        return keras3_counter(model)
    return getattr(model, "_train_counter", None)


def keras_module(version: int):
    """The Keras module that builds models for `version`: 2 is tf-keras (`tf_keras`, what tf.keras
    is under TF_USE_LEGACY_KERAS=1), 3 is `import keras` (Keras 3, which TensorFlow >= 2.16
    installs beside tf-keras and makes tf.keras by default)."""
    from tfdist.errors import ConfigError

    if version == 2:
        import tf_keras

        return tf_keras
    if version == 3:
        import keras

        if not keras.__version__.startswith("3."):
            raise ConfigError(f"--keras=3: `import keras` is Keras {keras.__version__} here, not "
                              "Keras 3. Fix: `pip install 'keras>=3'`.")
        return keras
    raise ConfigError(f"keras={version!r}: expected 2 or 3 (--keras).")
