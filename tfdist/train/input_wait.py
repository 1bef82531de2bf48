"""Time each training step spends waiting for its input batch, and count its samples, inside the
step itself.

Keras fetches the batch (`next(iterator)`) and runs the step in one traced function, so nothing
outside it can tell waiting from computing. `count_steps` rebuilds that function the way tf_keras
2.18's `Model.make_train_function` does for one step per call (Keras 3:
tfdist.keras3.fit_hooks), with two timestamps around the
fetch, and adds the wait and the batch's size to two variables: no extra call or host sync per
step, and the samples are counted, not inferred from a batch size the caller has to know.
"""

from __future__ import annotations

import logging
from typing import NamedTuple, Optional

import tensorflow as tf

from tfdist.keras3 import is_keras3

log = logging.getLogger("tfdist")


def unsupported(model) -> Optional[str]:
    """Why the input wait of this model's fit cannot be timed, or None."""
    if is_keras3(model):
        from tfdist.keras3 import fit_hooks

        return "steps_per_execution is not 1" if fit_hooks.steps_per_execution(model) != 1 else None
    steps = getattr(model, "_steps_per_execution", None)
    if getattr(model, "autotune_steps_per_execution",
               False) or (steps is not None and int(steps.numpy().item()) != 1):
        return "steps_per_execution is not 1"
    try:
        from tf_keras.src.engine import training  # noqa: F401
    except ImportError:
        return "tf_keras 2.x is not the Keras in use"
    return None


def workers(model) -> int:
    """How many processes run steps at once and add their waits to one variable: the workers of
    a parameter-server cluster, else 1 (each synchronous task keeps its own variable)."""
    if getattr(model, "_cluster_coordinator", None) is None:
        return 1
    return max(1, int(getattr(model.distribute_strategy.extended, "_num_workers", 1)))


class StepCounters(NamedTuple):
    """Totals since fit began, of this task (parameter_server: of every worker)."""

    waited: tf.Variable  # seconds the steps waited for their batch
    samples: tf.Variable  # samples the steps trained on (all local replicas)


def _batch_size(data, strategy):
    """Samples in this step's batch, over the task's local replicas."""
    first = tf.nest.flatten(data)[0]  # a tensor, or per-replica values of one
    sizes = [tf.shape(t)[0] for t in strategy.experimental_local_results(first)]
    return tf.cast(tf.add_n(sizes), tf.float64)


def count_steps(model) -> Optional[StepCounters]:
    """Replace model.train_function (call from on_train_begin: fit has just made it) by one that
    also adds each step's wait for input, in seconds, and its samples to the returned variables.
    None, with the reason logged, when this fit cannot be instrumented. Under parameter_server the
    steps run on the workers and the variables live on a parameter server: they sum every
    worker's."""
    reason = unsupported(model)
    if reason:
        log.info("input wait not measured: %s.", reason)
        return None

    # Created inside fit's strategy scope, by every task in the same order as its other
    # callbacks' variables; each synchronous task adds and reads its own (no aggregation).
    def variable(name):
        return tf.Variable(0.0, dtype=tf.float64, trainable=False, name=name)

    counters = StepCounters(variable("tfdist_input_wait"), variable("tfdist_samples"))
    if is_keras3(model):
        from tfdist.keras3 import fit_hooks

        fit_hooks.instrument_steps(model, counters, _batch_size)
        return counters
    strategy = model.distribute_strategy

    from tf_keras.src.engine.training import _minimum_control_deps, reduce_per_replica

    def run_step(data):
        outputs = model.train_step(data)
        with tf.control_dependencies(_minimum_control_deps(outputs)):
            model._train_counter.assign_add(1)
        return outputs

    if model.jit_compile:
        run_step = tf.function(run_step, jit_compile=True, reduce_retracing=True)

    def train_function(iterator):
        start = tf.timestamp()
        with tf.control_dependencies([start]):
            data = next(iterator)
        with tf.control_dependencies(tf.nest.flatten(data, expand_composites=True)):
            arrived = tf.timestamp()
        counters.waited.assign_add(arrived - start, read_value=False)
        counters.samples.assign_add(_batch_size(data, strategy), read_value=False)
        outputs = strategy.run(run_step, args=(data, ))
        return reduce_per_replica(outputs, strategy, reduction=model.distribute_reduction_method)

    if not model.run_eagerly:
        train_function = tf.function(train_function, reduce_retracing=True)
        model.train_tf_function = train_function
    coordinator = getattr(model, "_cluster_coordinator", None)
    if coordinator is not None:
        model.train_function = lambda iterator: coordinator.schedule(train_function,
                                                                     args=(iterator, ))
    else:
        model.train_function = train_function
    return counters
