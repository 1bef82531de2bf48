"""Everything tfdist knows about Keras: which Keras an object belongs to, one adapter per Keras
with the same functions tfdist's callbacks and engines call, and every correction tfdist makes to
Keras 3 so that its models train under each strategy.

- `adapter(model)`: tfdist.keras_compat.keras3_adapter or tf_keras_adapter, chosen once per model
  (Horovod's `*Impl(backend)` pattern). Engines and callbacks call it; they never ask which Keras.
- `callback.Callback`: the base of tfdist's callbacks, of neither Keras (both `fit`s take it), so
  that a Keras 3 process never loads tf-keras for tfdist.
- Keras 3's corrections, applied when Keras 3 is imported (apply): multi_worker,
  parameter_server, distributed_input, replica_loss, loss_scale, csv_logger; Horovod's Keras API
  bound to tf.keras's Keras (horovod_binding) and Keras 3's Horovod optimizer and callbacks
  (horovod).
- The gate (known_sources): every Keras or tf-keras function tfdist corrects, copies or replaces,
  with the sources it was run on; modules: their modules' names, each written once.
"""

import sys


def keras3_loaded():
    """The Keras 3 module when this process imported it (tfdist and TensorFlow never do)."""
    keras = sys.modules.get("keras")
    version = getattr(keras, "__version__", "")
    return keras if version.startswith("3.") else None


def keras3_passes_last_step() -> bool:
    """Whether this process's Keras 3 passes on_train_batch_end the index of a call's last step
    (3.11 on: its epoch iterator yields begin_step and end_step), not of its first (3.0-3.10).
    They differ with steps_per_execution > 1."""
    major, minor = (int(part) for part in keras3_loaded().__version__.split(".")[:2])
    return (major, minor) >= (3, 11)


def is_keras3(obj) -> bool:
    """True when `obj` (a model, layer, optimizer or callback, or its class) is a Keras 3 one."""
    cls = obj if isinstance(obj, type) else type(obj)
    if keras3_loaded() is None:
        return False
    return any(c.__module__.split(".")[0] == "keras" for c in cls.__mro__)


def adapter(obj):
    """The adapter of the Keras `obj` (a model, layer, optimizer or callback, or its class)
    belongs to: tfdist.keras_compat.keras3_adapter or tf_keras_adapter."""
    if is_keras3(obj):
        from tfdist.keras_compat import keras3_adapter

        return keras3_adapter
    from tfdist.keras_compat import tf_keras_adapter

    return tf_keras_adapter


def train_counter(model):
    """The variable counting the training steps that `model`'s current fit has completed (from 0,
    incremented after each step's outputs, so a step waiting for its batch is not counted):
    tf-keras's own `_train_counter`; for a Keras 3 model under parameter servers, the one
    tfdist's coordinator-driven fit keeps. None where there is none. Not the optimizer's
    counter: a train_step that steps optimizers of its own (a GAN) never moves that one."""
    return adapter(model).train_counter(model)


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
