"""Keras 3's `fit` under ParameterServerStrategy, driven through a ClusterCoordinator as tf-keras's.

Keras 3 does not support ParameterServerStrategy (keras-team/keras#18624): its `fit`, `evaluate`
and `predict` distribute their dataset with `experimental_distribute_dataset` outside a
coordinator, which the strategy refuses. tf-keras drives `fit` from the chief instead: every worker
builds its own input pipeline (`create_per_worker_dataset`), the chief `schedule`s one step
function per batch on whichever worker is free, `join`s at the end of each epoch and reads the
metrics, whose variables live on the parameter servers like the model's. This module does the
same for a Keras 3 model whose strategy is a ParameterServerStrategy:

- `fit`: the data is a `DatasetCreator` (what `rt.dataset` returns under parameter_server), a
  function of a `tf.distribute.InputContext` returning a `tf.data.Dataset` (each worker calls it),
  or a `tf.data.Dataset` (every worker iterates its own copy); `steps_per_epoch` is required, as in
  tf-keras. Batch-level callbacks run when a step is scheduled, not when it ran, and get no logs
  (asynchronous training has no "current" batch); epoch-level ones get the epoch's metrics.
- `evaluate` and `predict` (also `fit`'s `validation_data`) run on the chief itself with Keras's
  own loop, reading the variables from the parameter servers: exact results, no coordinator. For
  evaluation during training at scale, use the evaluator task (tfdist's `--evaluator`).

Arguments of `fit` that need Keras's in-memory data handling (`y`, `validation_split`,
`sample_weight`, `class_weight`) are refused with the way to do it instead.

Applied to Keras 3's TensorFlow trainer on import (keras_compat.apply); elsewhere than under a
ParameterServerStrategy Keras's own methods run. Measured with Keras 3.15.1 on TensorFlow 2.18.1
and 2.21.0 (chief, 1 ps, 2 workers and the evaluator: tests/keras3/test_parameter_server.py).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import weakref

from tfdist.errors import ConfigError
from tfdist.keras_compat.known_sources import known, unknown
from tfdist.keras_compat.modules import TRAINER

log = logging.getLogger("tfdist")

_MARK = "_tfdist_parameter_server"
FIT = "TensorFlowTrainer.fit"  # the Keras function `fit` below replaces (source gated)
_counters: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # model -> steps completed


class ParameterServerFitError(ConfigError):
    """A Keras 3 `fit` argument that the coordinator-driven fit cannot take."""


def is_parameter_server(strategy) -> bool:
    import tensorflow as tf

    return isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy)


def apply(trainer) -> None:
    """Route fit, evaluate and predict of `trainer.TensorFlowTrainer` here under a
    ParameterServerStrategy, and make Keras's variable increments atomic there (idempotent)."""
    cls = trainer.TensorFlowTrainer
    if getattr(cls.fit, _MARK, False):
        return
    _atomic_increments()
    fit_known = known(FIT, cls.fit)
    for name in ("fit", "evaluate", "predict"):
        keras_method = getattr(cls, name)
        ours = functools.partial(_on_the_chief, keras_method)
        if name == "fit":
            ours = fit if fit_known else _unknown_fit

        def method(self, *args, _keras=keras_method, _ours=ours, **kwargs):
            if self._distribute_strategy is not None and is_parameter_server(
                    self._distribute_strategy):
                return _ours(self, *args, **kwargs)
            return _keras(self, *args, **kwargs)

        functools.update_wrapper(method, keras_method)
        setattr(method, _MARK, True)
        setattr(cls, name, method)


def _unknown_fit(model, *args, **kwargs):
    import importlib.metadata

    raise unknown((FIT, ), TRAINER, importlib.metadata.version("keras"),
                  "under ParameterServerStrategy (its fit is replaced there by one driven by a "
                  "ClusterCoordinator, as tf-keras's)",
                  "build the model with tf-keras (`export TF_USE_LEGACY_KERAS=1` and `from "
                  "tensorflow import keras`)")


def _atomic_increments() -> None:
    """Keras 3's `Variable.assign_add/assign_sub` are `assign(self + value)`: a read, then a
    write. Workers of a parameter-server cluster update the same variables at once, so increments
    were lost (measured: optimizer.iterations 323 after 400 steps on 2 workers); metric totals and
    counts and the seed generators' state race the same way. Under a ParameterServerStrategy they
    become TensorFlow's own assign_add/assign_sub, one atomic op on the parameter server, as in
    tf-keras. Keras's weight updates already use those (its TensorFlow optimizer)."""
    import tensorflow as tf
    from keras.src.backend.common.stateless_scope import in_stateless_scope
    from keras.src.backend.tensorflow.core import Variable

    for name in ("assign_add", "assign_sub"):
        keras_method = getattr(Variable, name)

        def method(self, value, _keras=keras_method, _name=name):
            if in_stateless_scope() or not is_parameter_server(tf.distribute.get_strategy()):
                return _keras(self, value)
            return getattr(self._value, _name)(tf.cast(value, self._value.dtype))

        functools.update_wrapper(method, keras_method)
        setattr(Variable, name, method)


def _dataset_fn(x):
    """A function of an InputContext that each worker calls to make its dataset."""
    import tensorflow as tf

    if isinstance(x, tf.data.Dataset):
        return lambda input_context: x
    if callable(x):  # tf_keras's DatasetCreator is callable with the InputContext too
        return x
    raise ParameterServerFitError(
        f"fit under ParameterServerStrategy got x of type {type(x).__name__}: expected a "
        "function of a tf.distribute.InputContext returning a tf.data.Dataset (each worker "
        "builds its own: `rt.dataset(fn)` under tfdist, or tf_keras.utils.experimental."
        "DatasetCreator(fn)), or a tf.data.Dataset. Wrap arrays in "
        "tf.data.Dataset.from_tensor_slices((x, y)).batch(...).repeat().")


def _refuse(**given) -> None:
    for name, value in given.items():
        if value is not None and not (name == "validation_split" and not value):
            raise ParameterServerFitError(
                f"fit under ParameterServerStrategy does not take `{name}`: the workers "
                "read their own input pipelines. Put labels (and sample weights) in the dataset "
                "elements, as (x, y) or (x, y, sample_weight), and pass the validation data as "
                "validation_data.")


def fit(model,
        x=None,
        y=None,
        batch_size=None,
        epochs=1,
        verbose="auto",
        callbacks=None,
        validation_split=0.0,
        validation_data=None,
        shuffle=True,
        class_weight=None,
        sample_weight=None,
        initial_epoch=0,
        steps_per_epoch=None,
        validation_steps=None,
        validation_batch_size=None,
        validation_freq=1):
    """Keras 3's Model.fit, run by the chief through a ClusterCoordinator (see the module)."""
    import tensorflow as tf
    from keras.src.callbacks.callback_list import CallbackList
    from keras.src.trainers.data_adapters.data_adapter_utils import unpack_x_y_sample_weight

    from tfdist.keras_compat import adapter, keras3_passes_last_step

    model._assert_compile_called("fit")
    dataset_fn = _dataset_fn(x)
    _refuse(y=y,
            validation_split=validation_split,
            class_weight=class_weight,
            sample_weight=sample_weight)
    if not steps_per_epoch:
        raise ParameterServerFitError(
            "fit under ParameterServerStrategy needs steps_per_epoch: the workers' datasets "
            "have no common end (repeat() them), as with tf-keras.")
    strategy = model.distribute_strategy
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    if not model.built or not model.optimizer.built:
        # Keras builds the model, its metrics and optimizer from the shapes of one batch: the
        # element spec of the dataset, made here without reading it.
        spec = dataset_fn(tf.distribute.InputContext()).element_spec
        with strategy.scope():
            model._symbolic_build(data_batch=spec)

    step = counting_step(model)
    train_counter(model).assign(0)  # this fit's steps, as tf-keras's _train_counter

    calls = adapter(model).steps_per_execution(model)

    @tf.function(reduce_retracing=True)
    def train_function(iterator):
        return strategy.run(step, args=(next(iterator), ))

    @tf.function
    def train_steps(iterator, steps):  # steps_per_execution: `steps` steps in one scheduled call
        for _ in tf.range(steps):
            strategy.run(step, args=(next(iterator), ))

    if isinstance(x, tf.data.Dataset):
        # The chief's own dataset: the coordinator sends its graph to each worker (a function
        # that captured it would send the chief's dataset handle, which no worker can read:
        # "Unable to parse tensor proto").
        per_worker = coordinator.create_per_worker_dataset(
            strategy.experimental_distribute_dataset(x))
    else:
        per_worker = coordinator.create_per_worker_dataset(
            lambda: strategy.distribute_datasets_from_function(dataset_fn))
    iterator = iter(per_worker)
    # As tf-keras: model.train_function schedules one step, and callbacks that rebuild it from
    # on_train_begin (tfdist's step meter) find the coordinator where tf-keras keeps it.
    model._cluster_coordinator = coordinator
    model.train_function = lambda it: coordinator.schedule(train_function, args=(it, ))
    if calls > 1:  # a call of Keras 3's own fit runs steps_per_execution steps
        model.train_function = lambda it, steps=calls: coordinator.schedule(
            train_steps, args=(it, tf.constant(steps, tf.int64)))
    if verbose == "auto":
        verbose = 1
    callbacks = CallbackList(callbacks,
                             add_history=True,
                             add_progbar=verbose != 0,
                             verbose=verbose,
                             epochs=epochs,
                             steps=steps_per_epoch,
                             model=model)
    model.stop_training = False
    with strategy.scope():  # variables callbacks make belong on the parameter servers
        callbacks.on_train_begin()
    logs = {}
    # Where a restoring callback says training continues: Keras 3's BackupAndRestore sets
    # _initial_epoch; tfdist's checkpoint (and tf-keras's) answer through _training_state.
    initial_epoch = model._initial_epoch or initial_epoch
    state = getattr(model, "_training_state", None)
    if state is not None:
        initial_epoch, _ = state.maybe_load_initial_counters_from_ckpt(
            steps_per_epoch, initial_epoch)
    for epoch in range(initial_epoch, epochs):
        model.reset_metrics()
        callbacks.on_epoch_begin(epoch)
        for batch in range(0, steps_per_epoch, calls):
            # As Keras 3's fit with steps_per_execution, except that the epoch's last call runs
            # only the steps left (Keras 3 runs it in full), as tf-keras's does.
            steps = min(calls, steps_per_epoch - batch)
            callbacks.on_train_batch_begin(batch)
            if calls > 1:
                model.train_function(iterator, steps)
            else:
                model.train_function(iterator)
            # The index Keras passes: its call's first step before 3.11, its last since.
            callbacks.on_train_batch_end(batch + steps - 1 if keras3_passes_last_step() else batch)
            if model.stop_training:
                break
        coordinator.join()
        logs = model.get_metrics_result()  # the variables on the parameter servers
        if validation_data is not None and (epoch + 1) % validation_freq == 0:
            val_x, val_y, val_weight = unpack_x_y_sample_weight(validation_data)
            val = model.evaluate(val_x,
                                 val_y,
                                 sample_weight=val_weight,
                                 steps=validation_steps,
                                 batch_size=validation_batch_size or batch_size,
                                 verbose=0,
                                 return_dict=True)
            logs.update({f"val_{name}": value for name, value in val.items()})
        callbacks.on_epoch_end(epoch, logs)
        if model.stop_training:
            break
    if epochs > initial_epoch:
        model.optimizer.finalize_variable_values(model.trainable_weights)
    callbacks.on_train_end(logs)
    return model.history


def counting_step(model):
    """`model.train_step`, also counting each step in `train_counter(model)` once its outputs
    exist (a step waiting for its batch is not done), as tf-keras's train function does."""
    import tensorflow as tf

    train_step = tf.autograph.experimental.do_not_convert(model.train_step)
    counter = _counter(model)

    def step(data):
        outputs = train_step(data)
        with tf.control_dependencies([t for t in tf.nest.flatten(outputs) if tf.is_tensor(t)]):
            counter.assign_add(1, read_value=False)
        return outputs

    return step


def train_counter(model):
    """The steps the current (or last) coordinator-driven fit of `model` completed: a variable on
    a parameter server; None before its first fit."""
    return _counters.get(model)


def _counter(model):
    """The model's step counter, made on first use where the strategy puts variables. Kept off the
    model's attributes, so that Keras and checkpoints do not track it."""
    import tensorflow as tf

    if model not in _counters:
        with model.distribute_strategy.scope():
            _counters[model] = tf.Variable(0,
                                           dtype=tf.int64,
                                           trainable=False,
                                           name="tfdist_train_counter",
                                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    return _counters[model]


def _on_the_chief(keras_method, model, *args, **kwargs):
    """Keras's own evaluate/predict, run on the chief without the strategy."""
    with _without_strategy(model):
        return keras_method(model, *args, **kwargs)


@contextlib.contextmanager
def _without_strategy(model):
    """Keras runs its loop with TensorFlow's default strategy (the program's default that
    tfdist.init() set is left meanwhile); the variables stay where they are."""
    import tensorflow as tf

    from tfdist.distribute.default_strategy import outside

    with outside():
        if tf.distribute.has_strategy():
            raise ParameterServerFitError(
                "evaluate and predict of a parameter-server model run on the chief: call them "
                "outside `strategy.scope()`.")
        saved = model._distribute_strategy
        model._distribute_strategy = None
        try:
            yield
        finally:
            model._distribute_strategy = saved
