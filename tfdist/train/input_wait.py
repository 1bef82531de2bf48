"""Time each training step spends waiting for its input batch, and count its samples, inside the
step itself.

Keras fetches the batch (`next(iterator)`) and runs the step in one traced function, so nothing
outside it can tell waiting from computing. `count_steps` has the model's Keras adapter
(tfdist.keras_compat) rebuild that function as Keras's own `make_train_function` does for one
step per call, with two timestamps around the fetch, and adds the wait and the batch's size to one
variable: no extra call or host sync per step, and the samples are counted, not inferred from
a batch size the caller has to know.
"""

from __future__ import annotations

import logging
from typing import Optional

import tensorflow as tf

from tfdist.keras_compat import adapter

log = logging.getLogger("tfdist")


def unsupported(model, steps_per_epoch: Optional[int] = None) -> Optional[str]:
    """Why the input wait of this model's fit (of `steps_per_epoch` steps, None: not known)
    cannot be timed, or None."""
    return adapter(model).steps_unsupported(model, steps_per_epoch)


def workers(model) -> int:
    """How many processes run steps at once and add their waits to one variable: the workers of
    a parameter-server cluster, else 1 (each synchronous task keeps its own variable)."""
    if getattr(model, "_cluster_coordinator", None) is None:
        return 1
    return max(1, int(getattr(model.distribute_strategy.extended, "_num_workers", 1)))


class StepCounters:
    """Totals since fit began, of this task (parameter_server: of every worker): the seconds the
    steps waited for their batch and the samples they trained on (all local replicas), in one
    variable, so a step makes one update (parameter_server: one write to a parameter server, not
    two) and a reading takes both at once."""

    def __init__(self, totals: tf.Variable):
        self.totals = totals  # float64 [seconds waited, samples]

    def add(self, waited, samples) -> None:
        """Inside the step: add its wait (seconds) and its samples."""
        self.totals.assign_add(tf.stack([waited, samples]), read_value=False)

    def read(self) -> tuple[float, float]:
        """(seconds waited, samples) so far."""
        waited, samples = self.totals.numpy().tolist()
        return waited, samples


def _batch_size(data, strategy):
    """Samples in this step's batch, over the task's local replicas."""
    first = tf.nest.flatten(data)[0]  # a tensor, or per-replica values of one
    sizes = [tf.shape(t)[0] for t in strategy.experimental_local_results(first)]
    return tf.cast(tf.add_n(sizes), tf.float64)


def count_steps(model, steps_per_epoch: Optional[int] = None) -> Optional[StepCounters]:
    """Replace model.train_function (call from on_train_begin: fit has just made it) by one that
    also adds each step's wait for input, in seconds, and its samples to the returned variables.
    None, with the reason logged, when this fit cannot be instrumented. Under parameter_server the
    steps run on the workers and the variables live on a parameter server: they sum every
    worker's."""
    reason = unsupported(model, steps_per_epoch)
    if reason:
        log.info("input wait not measured: %s.", reason)
        return None

    # Created inside fit's strategy scope, by every task in the same order as its other
    # callbacks' variables; each synchronous task adds and reads its own (no aggregation).
    counters = StepCounters(
        tf.Variable(tf.zeros([2], tf.float64), trainable=False, name="tfdist_input_wait_samples"))
    adapter(model).instrument_steps(model, counters, _batch_size)
    return counters
