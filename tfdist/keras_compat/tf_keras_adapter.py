"""tf-keras (`TF_USE_LEGACY_KERAS=1`) under tfdist's callbacks: the same functions as
tfdist.keras_compat.keras3_adapter, through the hooks tf-keras's `fit` has.

- `start_from`: tf-keras's fit asks `model._training_state` where to start (the hook of its own
  BackupAndRestore); tfdist's checkpoint callback is that state.
- `instrument_steps`: the train function rebuilt as tf_keras 2.18's `Model.make_train_function`
  builds it (source gated: tfdist.keras_compat.known_sources), with the input wait and samples
  counted inside each step, whatever its steps_per_execution.
- `train_counter`: tf-keras's own `_train_counter`.
- Layer statistics: tf-keras makes BatchNormalization's moving statistics on-read variables,
  which the strategy averages whenever they are read.
"""

from __future__ import annotations

import importlib
from typing import Optional

from tfdist.keras_compat import known_sources
from tfdist.keras_compat.modules import TF_KERAS_TRAINING

GENERATION = 2  # the identity a checkpoint records: the variables' names differ between Kerases
STATISTICS_AVERAGED_BY_STRATEGY = True


def train_counter(model):
    """The variable counting the steps the current fit has completed (tf-keras's own)."""
    return getattr(model, "_train_counter", None)


def build_to_restore(model, element_spec) -> None:
    """Nothing: a subclassed tf-keras model builds in its first step, and a checkpoint restored
    before then fills its variables as they are made (deferred restore)."""


def strategy_at_build(model):
    """The distribution strategy in scope when `model` was made; None outside any."""
    return getattr(model, "_distribution_strategy", None)


def optimizer(identifier):
    """The tf-keras optimizer `compile` would make of `identifier` (a name such as "adam", a
    config dict, or an optimizer, returned as it is)."""
    import tf_keras

    return tf_keras.optimizers.get(identifier)


def build_optimizer(model) -> None:
    """Make the optimizer's slot variables before a restore, so every one of them is filled (a
    legacy optimizer has no build: it makes them at its first step, which the restore fills)."""
    if model.trainable_variables and hasattr(model.optimizer, "build"):
        model.optimizer.build(model.trainable_variables)


def start_from(model, state, steps_per_epoch: int) -> None:
    """Make this fit start where `state` (a callback with maybe_load_initial_counters_from_ckpt)
    says: tf-keras's fit asks it itself."""
    model._training_state = state


def fit_ended(model, state) -> None:
    """Forget `state`: a later fit of this model (tfdist train's second under
    --steps_per_execution=auto) starts where its caller says. None, as tf-keras's Model sets it:
    its fit reads the attribute (deleted, the next fit failed with AttributeError)."""
    if getattr(model, "_training_state", None) is state:
        model._training_state = None


def steps_per_execution(model) -> int:
    """The training steps one call of the train function runs now (tf-keras's variable, which
    its autotuning may change between calls)."""
    steps = getattr(model, "_steps_per_execution", None)
    return max(1, int(steps.numpy().item())) if steps is not None else 1


def steps_done(model, batch: int) -> int:
    """The steps of the current epoch done when fit calls `on_train_batch_end(batch)`: tf-keras
    passes the index of the call's last step (and shortens the call that ends an epoch)."""
    return batch + 1


def execution_misaligned(model,
                         steps_per_epoch: Optional[int],
                         consequence: str = "") -> Optional[str]:
    """None: tf-keras resumes at any step, whatever its steps_per_execution."""
    return None


def steps_unsupported(model, steps_per_epoch: Optional[int] = None) -> Optional[str]:
    """Why the steps of this model's fit cannot be instrumented, or None (tf-keras's own loop is
    copied: any steps_per_epoch)."""
    try:
        training = importlib.import_module(TF_KERAS_TRAINING)
    except ImportError:
        return "tf_keras 2.x is not the Keras in use"
    if not known_sources.known(MAKE_TRAIN_FUNCTION, training.Model.make_train_function):
        return ("tf_keras's Model.make_train_function is not code tfdist ran "
                "(tfdist.keras_compat.known_sources)")
    return None


MAKE_TRAIN_FUNCTION = "Model.make_train_function"


def instrument_steps(model, counters, batch_size) -> None:
    """Replace `model.train_function` (from on_train_begin: fit has just made it) by tf-keras's
    own, plus each step's wait for its batch, in seconds, and its samples
    (`batch_size(data, strategy)`) added to `counters`. Its three forms, as tf_keras 2.18's
    `Model.make_train_function` makes them: one step a call; steps_per_execution steps a call,
    read from Keras's variable when the call runs (its data handler shortens an epoch's last call
    and its `"auto"` tuner changes it between calls); and under a cluster coordinator, the count
    when the call is scheduled."""
    import tensorflow as tf

    training = importlib.import_module(TF_KERAS_TRAINING)
    strategy = model.distribute_strategy

    def run_step(data):
        outputs = model.train_step(data)
        with tf.control_dependencies(training._minimum_control_deps(outputs)):
            model._train_counter.assign_add(1)
        return outputs

    if model.jit_compile:
        run_step = tf.function(run_step, jit_compile=True, reduce_retracing=True)

    def step_function(iterator):
        start = tf.timestamp()
        with tf.control_dependencies([start]):
            data = next(iterator)
        with tf.control_dependencies(tf.nest.flatten(data, expand_composites=True)):
            arrived = tf.timestamp()
        counters.add(arrived - start, batch_size(data, strategy))
        outputs = strategy.run(run_step, args=(data, ))
        return training.reduce_per_replica(outputs,
                                           strategy,
                                           reduction=model.distribute_reduction_method)

    steps = model._steps_per_execution
    coordinator = getattr(model, "_cluster_coordinator", None)
    single = steps is None or steps.numpy().item() == 1 and not model.autotune_steps_per_execution
    if single:
        train_function = step_function
    elif coordinator is not None:

        def train_function(iterator, steps_per_execution):
            for _ in tf.range(steps_per_execution):
                outputs = step_function(iterator)
            return outputs
    else:

        def train_function(iterator):
            for _ in tf.range(model._steps_per_execution):
                outputs = step_function(iterator)
            return outputs

    if not model.run_eagerly:
        train_function = tf.function(train_function, reduce_retracing=True)
        model.train_tf_function = train_function
    if coordinator is None:
        model.train_function = train_function
    elif single:
        model.train_function = lambda it: coordinator.schedule(train_function, args=(it, ))
    else:
        model.train_function = lambda it: coordinator.schedule(
            train_function, args=(it, model._steps_per_execution.value()))


def tensorboard(log_dir: str):
    """tf-keras's TensorBoard at epoch frequency without per-step work."""
    import tf_keras

    class EpochTensorBoard(tf_keras.callbacks.TensorBoard):
        """The graph of the train step is written at the end of the first epoch, and the per-step
        summaries (not recorded at this frequency anyway) are not even formed. Else Keras's
        callback timing takes its first steps for a slow callback and warns."""

        def on_train_begin(self, logs=None):
            super().on_train_begin(logs)
            self._graph_due, self._should_write_train_graph = self._should_write_train_graph, False

        def on_train_batch_end(self, batch, logs=None):
            if self._should_trace:  # profiling asked for
                super().on_train_batch_end(batch, logs)

        def on_epoch_end(self, epoch, logs=None):
            if self._graph_due:
                self._write_keras_model_train_graph()
                self._graph_due = False
            super().on_epoch_end(epoch, logs)

    return EpochTensorBoard(log_dir)


def saves_in_tensorflow_format(path, save_format) -> bool:
    """Whether tf-keras's save / save_weights writes TensorFlow's own format (SavedModel, a TF
    checkpoint), which reduces each on-read variable over the workers: a path without .keras /
    .h5 / .hdf5, or save_format "tf"."""
    if save_format is not None:
        return str(save_format).lower() in ("tf", "tensorflow")
    return not str(path).lower().endswith((".keras", ".h5", ".hdf5"))


def loss_scale(optimizer) -> Optional[float]:
    """The dynamic loss scale of a mixed_float16 LossScaleOptimizer (its value now), else None."""
    scale = getattr(optimizer, "loss_scale", None)
    if scale is None:
        return None
    import tf_keras

    return float(tf_keras.backend.get_value(scale))
