"""Keras 3 (`import keras`, tf.keras on TensorFlow >= 2.16) under tfdist's callbacks: the same
functions as tfdist.keras_compat.tf_keras_adapter, through the hooks Keras 3's `fit` offers.

- `start_from`: where a resumed fit starts. tf-keras asks `model._training_state` for the epoch
  and step; Keras 3 reads only the epoch (`model._initial_epoch`, the hook of its own
  BackupAndRestore) and has no step. The calls of the resumed epoch's train function that cover
  its first `step` steps (steps_per_execution each) then return without running: no batch is
  taken and no update made, so the epoch trains its remaining steps on the batches after the
  checkpoint's (the data already skips those trained, rt.dataset(skip_steps=...)), as tf-keras's
  resumed epoch does, and Keras's callbacks see the same batch numbers.
- `instrument_steps`: the train function rebuilt with the input wait and samples counted inside
  each step (tfdist.train.input_wait), as Keras 3's `make_train_function` builds its one step,
  for any steps_per_execution (source gated: tfdist.keras_compat.known_sources).
- `build_to_restore`: a model Keras 3 would build only in its first step, built before a restore.
- `steps_done`: the steps of an epoch done at a batch hook, from the index this Keras passes it.
- `tensorboard`: Keras 3's own TensorBoard callback; `loss_scale`: its LossScaleOptimizer's.
- Layer statistics: Keras 3 keeps a replica's own BatchNormalization statistics, averaged by
  tfdist (tfdist.distribute.layer_statistics).
"""

from __future__ import annotations

from typing import Optional

GENERATION = 3  # the identity a checkpoint records: the variables' names differ between Kerases
STATISTICS_AVERAGED_BY_STRATEGY = False
MAKE_TRAIN_FUNCTION = "TensorFlowTrainer.make_train_function"


def train_counter(model):
    """The steps the current fit completed: under parameter servers the variable tfdist's
    coordinator-driven fit keeps; else None (Keras 3 has no such counter)."""
    from tfdist.keras_compat.parameter_server import train_counter as coordinator_counter

    return coordinator_counter(model)


def strategy_at_build(model):
    """The distribution strategy in scope when `model` was made; None outside any."""
    return getattr(model, "_distribute_strategy", None)


def optimizer(identifier):
    """The Keras 3 optimizer `compile` would make of `identifier` (a name such as "adam", a
    config dict, or an optimizer, returned as it is)."""
    import keras

    return keras.optimizers.get(identifier)


def build_optimizer(model) -> None:
    """Make the optimizer's variables before a restore, so every one of them is filled."""
    if not model.optimizer.built and model.trainable_variables:
        model.optimizer.build(model.trainable_variables)


def start_from(model, state, steps_per_epoch: int) -> None:
    """Make this fit start where `state` (a callback with maybe_load_initial_counters_from_ckpt)
    says; call from on_train_begin."""
    _start_at(model, *state.maybe_load_initial_counters_from_ckpt(steps_per_epoch, 0))


def _start_at(model, epoch: int, step: int) -> None:
    """Make Keras 3's fit (called from on_train_begin) start `step` steps into `epoch`."""
    model._initial_epoch = epoch
    if not step:
        return
    calls = steps_per_execution(model)
    if step % calls:
        from tfdist.errors import ConfigError

        raise ConfigError(
            f"the checkpoint is {step} steps into epoch {epoch + 1}, and Keras 3 runs an epoch in "
            f"calls of steps_per_execution={calls} steps from its first: this fit cannot start "
            f"there. Fix: resume with the steps_per_execution the run had when it saved (one "
            f"that divides {step}).")
    train_function = model.train_function
    skipped = [0]

    def skipping(iterator):  # each call is `calls` steps
        if skipped[0] < step // calls:
            skipped[0] += 1
            return {}
        model.train_function = train_function  # the remaining steps: Keras's own, unwrapped
        return train_function(iterator)

    model.train_function = skipping


def fit_ended(model, state) -> None:
    """Forget the start of this fit: a later fit starts where its caller says."""
    model._initial_epoch = None


def instrument_steps(model, counters, batch_size) -> None:
    """Replace `model.train_function` (from on_train_begin: fit has just made it) by one that adds
    each step's wait for its batch, in seconds, and its samples (`batch_size(data, strategy)`) to
    `counters`; Keras's own function stays for calls without a dataset iterator (train_on_batch).
    A call runs the steps Keras's epoch iterator gives it (tfdist.keras_compat.call_steps: up to
    steps_per_execution, fewer at the end of the input's pass; a call of tfdist's parameter_server
    fit: the count it passes) in a plain loop, as tfdist.keras_compat.multi_step runs them."""
    import tensorflow as tf

    import importlib

    from tfdist.keras_compat import call_steps
    from tfdist.keras_compat.modules import TRAINER

    trainer = importlib.import_module(TRAINER)
    strategy = model.distribute_strategy
    own = model.train_function
    calls = steps_per_execution(model)
    coordinator = getattr(model, "_cluster_coordinator", None)  # keras_compat.parameter_server
    train_step = model.train_step
    if coordinator is not None:  # the watchdog counts the steps done there
        from tfdist.keras_compat.parameter_server import counting_step

        train_step = counting_step(model)

    def one_step_on_data(data):
        outputs = strategy.run(train_step, args=(data, ))
        return trainer.reduce_per_replica(outputs, strategy, reduction="auto")

    def step(iterator):
        start = tf.timestamp()
        with tf.control_dependencies([start]):
            data = iterator.get_next()
        with tf.control_dependencies(tf.nest.flatten(data, expand_composites=True)):
            arrived = tf.timestamp()
        counters.add(arrived - start, batch_size(data, strategy))
        return one_step_on_data(data)

    def steps(iterator, count):
        outputs = step(iterator)
        for _ in tf.range(count - 1):
            outputs = step(iterator)
        return outputs

    if not model.run_eagerly:
        one_step_on_data = tf.function(one_step_on_data,
                                       reduce_retracing=True,
                                       jit_compile=model.jit_compile)
        step = tf.function(step, reduce_retracing=True)
        steps = tf.function(steps, reduce_retracing=True)

    def train_function(iterator, count=None):
        if coordinator is not None:  # steps on a worker, their counters on a parameter server
            if count is None:
                return coordinator.schedule(step, args=(iterator, ))
            return coordinator.schedule(steps, args=(iterator, tf.constant(count, tf.int64)))
        if isinstance(iterator, (tf.data.Iterator, tf.distribute.DistributedIterator)):
            if calls == 1:
                return step(iterator)
            count = call_steps.of_call(iterator) or calls  # None: not from Keras's loop
            return steps(iterator, tf.constant(count))
        return own(iterator)

    model.train_function = train_function


def build_to_restore(model, element_spec) -> None:
    """Build `model` before its checkpoint is restored. Keras 3 builds a model in its first step
    where no distribution strategy is in scope (its `_maybe_symbolic_build`), after the callbacks
    have started; and unlike tf-keras it does not fill variables made after a restore (measured
    with Keras 3.15: a resumed subclassed model trained on from fresh weights, its optimizer held
    slots for variables no longer in it). Built here from the batches' element spec (rt.dataset
    records it), as Keras builds a model under a strategy."""
    from tfdist.errors import ConfigError

    if element_spec is None:
        raise ConfigError(
            f"{type(model).__name__} is not built when fit starts (a subclassed Keras 3 model is "
            "built in its first step), so tfdist cannot restore its checkpoint into it. Build it "
            "before fit: pass the data through `rt.dataset(fn)` (tfdist then builds it), or call "
            "the model on one batch, or `model.build(input_shape)`.")
    with model.distribute_strategy.scope():
        model._symbolic_build(data_batch=element_spec)


def steps_per_execution(model) -> int:
    """The training steps one call of the train function runs."""
    return max(1, int(getattr(model, "steps_per_execution", 1) or 1))


def steps_done(model, batch: int) -> int:
    """The steps of the current epoch done when fit calls `on_train_batch_end(batch)`. One call
    runs steps_per_execution steps; Keras 3.0-3.10 pass the index of its first step, 3.11 on that
    of its last (the epoch iterator's begin_step and end_step)."""
    calls = steps_per_execution(model)
    if calls == 1:
        return batch + 1
    from tfdist.keras_compat import keras3_passes_last_step

    return batch + 1 if keras3_passes_last_step() else batch + calls


def execution_misaligned(
        model,
        steps_per_epoch: Optional[int],
        consequence: str = "tfdist cannot resume a stopped run where it stopped") -> Optional[str]:
    """Why a checkpoint's position cannot be resumed exactly with this model's
    steps_per_execution, or None: Keras 3 runs every call in full while its input has batches,
    so an epoch of `steps_per_epoch` steps that is no multiple of it trains more steps than that
    (10 at 4 a call: 12), and a resumed run would skip what was not trained. An epoch that is
    its input's pass (fit given no steps_per_epoch) ends with the input: its last call runs the
    steps left (57 batches at 4 a call: 57 steps). `consequence`: what follows for the caller,
    said after the numbers."""
    from tfdist.keras_compat import call_steps

    calls = steps_per_execution(model)
    if calls == 1 or not steps_per_epoch or steps_per_epoch % calls == 0:
        return None
    if getattr(model, "_cluster_coordinator", None) is not None:
        return None  # tfdist's fit under parameter servers runs the steps left, as tf-keras
    if call_steps.steps_per_epoch_given() is False:
        return None  # the epoch is the input's pass: its last call runs the steps left
    trained = -(-steps_per_epoch // calls) * calls
    return (f"steps_per_execution={calls} does not divide steps_per_epoch={steps_per_epoch}: "
            f"Keras 3 runs each call in full, so every epoch trains {trained} steps, not "
            f"{steps_per_epoch}{', and ' + consequence if consequence else ''}. Fix: "
            f"a steps_per_epoch that is a multiple of {calls} (e.g. "
            f"{steps_per_epoch - steps_per_epoch % calls or calls}), or a steps_per_execution "
            f"that divides {steps_per_epoch}.")


def steps_unsupported(model, steps_per_epoch: Optional[int] = None) -> Optional[str]:
    """Why the steps of this model's fit (of `steps_per_epoch` steps, None: not known) cannot be
    instrumented, or None. With N > 1 steps a call only where the epoch's steps are known: the
    plain loop of instrument_steps runs the steps left in the input's pass (call_steps), and an
    input whose end Keras does not know costs the optimizer's count a step there, where Keras's
    own loop stops at the end (measured 2026-11-28, Keras 3.8, NumPy input of 57 batches at 4 a
    call, one replica, the loop at 4 a call to the end: 116 steps in 2 epochs against Keras's
    114, other weights)."""
    from tfdist.keras_compat import call_steps, known_sources

    # Copied: the one-step function of make_train_function; with more than one step a call, the
    # count of steps a call of `_make_function`'s function runs.
    names = [MAKE_TRAIN_FUNCTION]
    calls = steps_per_execution(model)
    if calls > 1:
        if not steps_per_epoch:
            return f"steps_per_execution={calls} and the epoch's number of steps is not known"
        if not call_steps.noting():
            return (f"Keras's {call_steps.NAME} is not code tfdist ran "
                    "(tfdist.keras_compat.known_sources)")
        names.append("TensorFlowTrainer._make_function")
    for name in names:
        if not known_sources.known(name, known_sources.function_here(name)):
            return f"Keras's {name} is not code tfdist ran (tfdist.keras_compat.known_sources)"
    return None


def tensorboard(log_dir: str):
    import keras

    return keras.callbacks.TensorBoard(log_dir)


def saves_in_tensorflow_format(path, save_format) -> bool:
    """Keras 3 saves .keras and .h5 only (SavedModel is `model.export`)."""
    return False


def loss_scale(optimizer) -> Optional[float]:
    scale = getattr(optimizer, "dynamic_scale", None)
    return None if scale is None else float(scale.numpy())
