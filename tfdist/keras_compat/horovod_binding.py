"""Horovod's Keras API bound to the Keras that `tf.keras` is, whatever the order of the imports.

`horovod.tensorflow.keras` takes `keras.callbacks.Callback` from `tf.keras` but its backend `K`
from `import keras`. Beside TensorFlow >= 2.16 `import keras` is Keras 3 whatever tf.keras is, so:

- Where the user chose tf-keras (TF_USE_LEGACY_KERAS=1), Horovod is bound to tf-keras throughout:
  the module is executed with `keras` resolving to `tf_keras`, and only for that execution. Its
  callbacks would otherwise fail in the first epoch (`module 'keras.backend' has no attribute
  'constant'`, upstream horovod#4290). Modules Horovod imported before tfdist are re-executed in
  place (`importlib.reload`), so the user's `hvd` module object gets tf-keras callbacks too.
- Where tf.keras is Keras 3 (TensorFlow's default), Horovod's modules are Keras 3's as Horovod
  binds them, and what of them touches Keras 2 only APIs goes to tfdist.keras_compat.horovod.

Either way `import tfdist` installs an import hook (tfdist.import_hooks) for Horovod Keras modules
imported afterwards, and corrects those imported before.

The same API takes Keras 3 objects under either binding: `DistributedOptimizer` of a Keras 3
optimizer, and the callbacks when their model is a Keras 3 model, go to tfdist.keras_compat.horovod
(Horovod's own code calls Keras 2 optimizer hooks, `var.ref()` and backend functions that Keras 3
lacks).

Horovod 0.28.1's `LearningRateScheduleCallback` (and so `LearningRateWarmupCallback`) also applies
"momentum correction" by `K.set_value(optimizer.momentum, ...)`; tf-keras's and Keras 3's
optimizers keep `momentum` as a Python float, which TensorFlow bakes into the traced step, so the
correction can have no effect and the call fails (`'float' object has no attribute 'dtype'`). The
callback then skips it with a warning; the learning rate itself is scheduled as Horovod intends.

Nothing here imports TensorFlow or Horovod at import time: `import tfdist` stays cheap.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import sys
from typing import Iterator

from tfdist import import_hooks
from tfdist.tf_environ import legacy_keras

log = logging.getLogger("tfdist")

# Horovod 0.28's modules that bind `keras` when executed, in the order a reload must follow
# (each after the modules it takes names from).
KERAS_MODULES = (
    "horovod._keras.callbacks",
    "horovod._keras.elastic",
    "horovod._keras",
    "horovod.tensorflow.keras.callbacks",
    "horovod.tensorflow.keras.elastic",
    "horovod.tensorflow.keras",
    "horovod.keras.callbacks",
    "horovod.keras.elastic",
    "horovod.keras",
)
_MARK = "_tfdist_tf_keras"  # set on a module executed under the alias
_depth = [0]  # nesting of _keras_is_tf_keras (Horovod's modules import each other)


def _is_keras_name(name: str) -> bool:
    return name == "keras" or name.startswith("keras.")


@contextlib.contextmanager
def _keras_is_tf_keras() -> Iterator[None]:
    """`keras` (and `keras.*`) resolve to tf_keras inside; sys.modules is as before afterwards."""
    if _depth[0]:
        _depth[0] += 1
        try:
            yield
        finally:
            _depth[0] -= 1
        return
    import tf_keras
    import tf_keras.backend  # noqa: F401  (Horovod's `from keras import backend as K`)

    saved = {name: mod for name, mod in sys.modules.items() if _is_keras_name(name)}
    for name in saved:
        del sys.modules[name]
    # tf_keras's loaded submodules under their `keras.` names too: else `from keras import X`
    # would execute a second copy of tf_keras.X under the name keras.X.
    for name, mod in list(sys.modules.items()):
        if name == "tf_keras" or name.startswith("tf_keras."):
            sys.modules["keras" + name[len("tf_keras"):]] = mod
    _depth[0] = 1
    try:
        yield
    finally:
        _depth[0] = 0
        for name in [name for name in sys.modules if _is_keras_name(name)]:
            del sys.modules[name]
        sys.modules.update(saved)


def _after_exec(module) -> None:
    if getattr(module, _MARK, False):
        return
    setattr(module, _MARK, True)
    if module.__name__ == "horovod._keras.callbacks":
        _callbacks_take_keras3_models(module)
        _skip_float_momentum_correction(module)
    elif module.__name__ == "horovod.tensorflow.keras":
        _optimizer_takes_keras3(module)


def _alias_if_legacy():
    """`keras` resolves to tf_keras while a Horovod Keras module executes, when tf.keras is."""
    return _keras_is_tf_keras() if legacy_keras() else contextlib.nullcontext()


def install() -> None:
    """Bind Horovod's Keras API to tf.keras's Keras from now on (idempotent; called by `import
    tfdist`), and correct the modules Horovod already imported (rebind_imported). Horovod's
    TensorFlow API takes Keras 3 variables too (keras_compat.horovod.correct_tensorflow_api)."""
    for name in KERAS_MODULES:
        import_hooks.when_imported(name, after=_after_exec, around=_alias_if_legacy)
    import_hooks.when_imported(TENSORFLOW_MODULE, after=_tensorflow_api_takes_keras3)
    if TENSORFLOW_MODULE in sys.modules:
        _tensorflow_api_takes_keras3(sys.modules[TENSORFLOW_MODULE])
    rebind_imported()


TENSORFLOW_MODULE = "horovod.tensorflow"


def _tensorflow_api_takes_keras3(module) -> None:
    from tfdist.keras_compat.horovod import correct_tensorflow_api

    correct_tensorflow_api(module)


def rebind_imported() -> list[str]:
    """Correct the Horovod Keras modules imported before the hook; their names. Under tf-keras
    they are re-executed under the alias first (when TensorFlow has not already made `tf.keras`
    Keras 3, which only a switch set after TensorFlow loaded can do: then they stay Keras 3's)."""
    stale = [
        name for name in KERAS_MODULES
        if name in sys.modules and not getattr(sys.modules[name], _MARK, False)
    ]
    if not stale:
        return []
    if legacy_keras() and not _tf_keras_is_keras3():
        with _keras_is_tf_keras():
            for name in stale:
                importlib.reload(sys.modules[name])
        log.debug("tfdist: re-bound %s to tf-keras", ", ".join(stale))
    for name in stale:
        _after_exec(sys.modules[name])
    return stale


def _tf_keras_is_keras3() -> bool:
    """True when TensorFlow already resolved `tf.keras` to Keras 3 in this process (final)."""
    tf = sys.modules.get("tensorflow")
    loader = getattr(tf, "__dict__", {}).get("keras")
    # TensorFlow's KerasLazyLoader resolves on first use; read its state without resolving it.
    state = getattr(loader, "__dict__", {})
    return bool(state.get("_tfll_initialized")) and state.get("_tfll_keras_version") == "keras_3"


def _optimizer_takes_keras3(module) -> None:
    """hvd.DistributedOptimizer of a Keras 3 optimizer: tfdist.keras_compat.horovod's."""
    keras2 = module.DistributedOptimizer

    @functools.wraps(keras2)
    def DistributedOptimizer(optimizer, *args, **kwargs):
        from tfdist.keras_compat import is_keras3

        if is_keras3(optimizer):
            from tfdist.keras_compat.horovod import distributed_optimizer

            return distributed_optimizer(optimizer, *args, **kwargs)
        wrapped = keras2(optimizer, *args, **kwargs)
        _saved_as_wrapped(wrapped, optimizer)
        return wrapped

    module.DistributedOptimizer = DistributedOptimizer


def _saved_as_wrapped(wrapped, optimizer) -> None:
    """A tf-keras model saved with Horovod's optimizer loads with plain tf-keras, its optimizer
    the script's own class (Horovod's intent: "so that the saved model could be easily restored
    without Horovod"). Measured with Horovod 0.28.1 and tf-keras 2.18:
    - `.keras`: Horovod names its class after the wrapped one but leaves it in its own module, so
      the file named `horovod._keras.SGD`, which no module has: load_model failed, with Horovod
      or without ("Could not locate class 'SGD'"). Now in the wrapped class's module.
    - SavedModel: the optimizer's all-reduce, a tf.function attribute, was saved with it, and
      loading needed Horovod's ops ("Op type not registered 'HorovodAllreduce'"). Now called
      through a plain function, which SavedModel does not save; the training step is the same.
    `.h5` names the class only, and loaded already."""
    cls = type(wrapped)
    if cls is not type(optimizer) and cls.__name__ == type(optimizer).__name__:
        cls.__module__ = type(optimizer).__module__
        cls.__qualname__ = type(optimizer).__qualname__
    allreduce = getattr(wrapped, "_allreduce_grads", None)
    if allreduce is not None:

        def allreduce_grads(*args, **kwargs):
            return allreduce(*args, **kwargs)

        wrapped._allreduce_grads = allreduce_grads


def _callbacks_take_keras3_models(impl) -> None:
    """Horovod's callback implementations, where they touch Keras objects, dispatch to
    tfdist.keras_compat.horovod when the callback's model (or the variable) is a Keras 3 one.
    MetricAverageCallback reduces the numbers in `logs`, through its backend's `constant`, which
    only tf-keras's backend has."""
    from tfdist.keras_compat import is_keras3

    def keras3():
        from tfdist.keras_compat import horovod

        return horovod

    def dispatch(cls, name, keras3_method, on=lambda self, *args: self.model):
        keras2_method = getattr(cls, name)

        @functools.wraps(keras2_method)
        def method(self, *args, **kwargs):
            if is_keras3(on(self, *args)):
                return keras3_method(self, *args, **kwargs)
            return keras2_method(self, *args, **kwargs)

        setattr(cls, name, method)

    bcast = impl.BroadcastGlobalVariablesCallbackImpl
    dispatch(bcast,
             "register_local_var",
             lambda self, var: self._local_vars.add(keras3().local_variable_ref(var)),
             on=lambda self, var: var)
    dispatch(bcast,
             "on_batch_end",
             lambda self, batch, logs=None: keras3().broadcast_model_and_optimizer(self))

    schedule = impl.LearningRateScheduleCallbackImpl

    def on_train_begin(self, logs=None):
        if self.initial_lr is None:
            self.initial_lr = keras3().get_lr(self.model.optimizer)
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._autodetect_steps_per_epoch()

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = keras3().get_lr(self.model.optimizer)

    dispatch(schedule, "_adjust_learning_rate",
             lambda self, epoch: keras3().adjust_learning_rate(self, epoch))
    dispatch(schedule, "_restore_momentum_if_needed", lambda self: keras3().restore_momentum(self))
    dispatch(schedule, "on_train_begin", on_train_begin)
    dispatch(schedule, "on_epoch_end", on_epoch_end)

    def warmup_on_epoch_end(self, epoch, logs=None):
        schedule.on_epoch_end(self, epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0 and impl.hvd.rank() == 0:
            print("\nEpoch %d: finished gradual learning rate warmup to %g." %
                  (epoch + 1, keras3().get_lr(self.model.optimizer)))

    dispatch(impl.LearningRateWarmupCallbackImpl, "on_epoch_end", warmup_on_epoch_end)

    average = impl.MetricAverageCallbackImpl
    keras2_average = average._average_metrics_in_place

    @functools.wraps(keras2_average)
    def _average_metrics_in_place(self, logs):
        if hasattr(self.backend, "constant"):  # tf-keras's backend: Horovod's own code
            return keras2_average(self, logs)
        return keras3().average_metrics_in_place(logs)

    average._average_metrics_in_place = _average_metrics_in_place


def _skip_float_momentum_correction(impl) -> None:
    """Make Horovod's LR schedule callbacks skip momentum correction where momentum is a float."""
    cls = impl.LearningRateScheduleCallbackImpl
    if getattr(cls, _MARK, False):
        return
    adjust = cls._adjust_learning_rate

    def _adjust_learning_rate(self, epoch):
        momentum = getattr(self.model.optimizer, "momentum", None)
        if self.momentum_correction and isinstance(momentum, (int, float)):
            self.momentum_correction = False
            log.warning(
                "Horovod's momentum correction is skipped: this optimizer's momentum is a Python "
                "float (tf-keras and Keras 3), fixed when the step was traced. The learning-rate "
                "schedule applies; pass momentum_correction=False to silence this.")
        return adjust(self, epoch)

    cls._adjust_learning_rate = _adjust_learning_rate
    setattr(cls, _MARK, True)


HOROVOD_CALLBACKS = "horovod._keras.callbacks"  # the Impl classes, each Keras's callbacks' base


def callbacks_for_model(callbacks, model):
    """fit's `callbacks` (None, a callback, lists nested in lists) with each of Horovod's own
    callbacks that is Keras 3's replaced by its tf-keras twin, where `model` is a tf-keras model;
    lists are changed in place, the top level copied (a tuple made a list). Anything else is
    returned as it is.

    Horovod's Keras API is bound to tf.keras's Keras: Keras 3 unless TF_USE_LEGACY_KERAS=1. A
    script that builds its model with `import tf_keras` without the switch got Keras 3's
    callbacks (the engine's broadcast and metric averaging, or its own `hvd.callbacks.*`), and
    tf-keras's fit failed at its start ("'BroadcastGlobalVariablesCallback' object has no
    attribute '_implements_train_batch_hooks'"). The twin is Horovod's same implementation on
    tf-keras's `Callback` and backend, as Horovod binds it under the switch; its state (root
    rank, device, local variables, schedule) carried over. The other way (a Keras 3 model, the
    switch set) trains with Horovod's tf-keras callbacks as they are (measured)."""
    from tfdist.keras_compat import is_keras3

    if is_keras3(model) or callbacks is None:
        return callbacks
    if not isinstance(callbacks, (list, tuple)):
        return _tf_keras_twin(callbacks)
    return _twins_in(list(callbacks))


def _twins_in(callbacks: list) -> list:
    for i, callback in enumerate(callbacks):
        if isinstance(callback, list):
            _twins_in(callback)
        elif isinstance(callback, tuple):
            callbacks[i] = _twins_in(list(callback))
        else:
            callbacks[i] = _tf_keras_twin(callback)
    return callbacks


def _tf_keras_twin(callback):
    """`callback` as tf-keras's, where it is one of Horovod's callbacks on Keras 3's `Callback`
    (its class exactly one of Horovod's: a subclass may add what tfdist cannot carry over)."""
    from tfdist.keras_compat import is_keras3

    cls = type(callback)
    impl = [base for base in cls.__bases__ if base.__module__ == HOROVOD_CALLBACKS]
    if not impl or not cls.__module__.startswith("horovod.") or not is_keras3(cls):
        return callback
    import keras
    import tf_keras

    twin_class = _tf_keras_class(impl[0], cls.__name__)
    twin = twin_class.__new__(twin_class)
    tf_keras.callbacks.Callback.__init__(twin)
    keras_own = set(vars(keras.callbacks.Callback()))  # Keras 3's Callback's state, not Horovod's
    for name, value in vars(callback).items():
        if name not in keras_own:
            setattr(twin, name, value)
    twin.backend = tf_keras.backend
    return twin


@functools.lru_cache(maxsize=None)
def _tf_keras_class(impl, name: str):
    import tf_keras

    return type(name, (impl, tf_keras.callbacks.Callback), {"__module__": __name__})


def import_horovod_keras():
    """`horovod.tensorflow.keras` bound to tf.keras's Keras (imported now if need be)."""
    install()
    return importlib.import_module("horovod.tensorflow.keras")


def is_distributed_optimizer(optimizer) -> bool:
    """Whether `optimizer` already averages its gradients over Horovod's ranks: made by
    `hvd.DistributedOptimizer` (Horovod copies its `_DistributedOptimizer`'s methods into a class
    of the wrapped optimizer's name, for tf-keras; tfdist.keras_compat.horovod's class, for Keras
    3), or a LossScaleOptimizer around one."""
    cls = type(optimizer)
    if "_allreduce" in vars(cls) and "register_local_var" in vars(cls):  # Horovod's, tf-keras
        return True
    if any(c.__name__ == "DistributedKeras3Optimizer" and c.__module__ == "tfdist.keras_compat."
           "horovod" for c in cls.__mro__):
        return True
    inner = getattr(optimizer, "inner_optimizer", None)
    return inner is not None and is_distributed_optimizer(inner)
