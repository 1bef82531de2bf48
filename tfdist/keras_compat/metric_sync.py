"""Keras 3.8 and 3.9 under several replicas in sync: fit's training loss and metrics are wrong
(the model trains right); tfdist makes their metric variables as Keras 3.10 does.

A metric adds up its state in variables of aggregation "sum". Keras 3.8 hands that aggregation to
tf.Variable but no synchronization, so under MirroredStrategy and MultiWorkerMirroredStrategy they
are mirrored, synchronized on write, where tf-keras's are synchronized on read. Keras 3.10 makes
them on read too (its Metric.add_variable passes synchronization="on_read"; keras-team/keras#21467).
Measured (2026-11-28, TensorFlow 2.18.1, `tfdist train --model=cnn --pipeline=digits --keras=3`,
mirrored over 2 logical CPUs): Keras 3.8.0 and 3.9.2 logged the first step's loss and accuracy as
the epoch's (2.3082 and 0.1055 after 20, 40 or 80 steps; 3.10.0: 1.6542 and 0.5000 after 40) and
NaN for epochs of 150 steps, while the test accuracy was 0.983; multi_worker with 2 workers alike
(3.8.0: 2.3082 after 40 steps; 3.15.1: 1.6512). History, EarlyStopping, ReduceLROnPlateau,
ModelCheckpoint(save_best_only) and tfdist's epoch line all read those numbers.

Corrected where this Keras's variables take no synchronization (before 3.10) and it scales each
replica's loss (3.8 on; before that fit refuses several replicas, keras_compat.replica_loss): the
variables a metric adds are made synchronized on read, as in Keras 3.10. Under one replica that
changes nothing.
"""

from __future__ import annotations

import functools
import inspect
import threading

_MARK = "_tfdist_metric_sync"


def needed() -> bool:
    """Whether this Keras makes its metric variables without a synchronization (3.8 and 3.9)."""
    from keras.src.backend.common.variables import Variable

    from tfdist.keras_compat.replica_loss import scales_loss

    return scales_loss() and "synchronization" not in inspect.signature(Variable).parameters


def apply(module) -> None:
    """Correct `module` (keras.src.metrics.metric) in place, once, where needed()."""
    cls = module.Metric
    if getattr(cls.add_variable, _MARK, False) or not needed():
        return
    from keras.src.backend.tensorflow import core

    cls.add_variable = _marking(cls.add_variable)
    core.Variable._initialize = _on_read(core.Variable._initialize)


_creating = threading.local()  # inside a Metric.add_variable


def _marking(add_variable):
    """Metric.add_variable, its variable marked as a metric's: made now (in _creating) or later
    (Keras defers the variables it makes in a stateless scope, e.g. the compiled metrics Keras
    builds in its first step, to tf.init_scope)."""

    @functools.wraps(add_variable)
    def method(self, *args, **kwargs):
        outer, _creating.metric = getattr(_creating, "metric", False), True
        try:
            variable = add_variable(self, *args, **kwargs)
        finally:
            _creating.metric = outer
        variable._tfdist_metric = True
        return variable

    setattr(method, _MARK, True)
    return method


def _on_read(initialize):
    """The TensorFlow backend's Variable._initialize, a metric's variable synchronized on read."""

    @functools.wraps(initialize)
    def method(self, value):
        if not (getattr(_creating, "metric", False) or getattr(self, "_tfdist_metric", False)):
            return initialize(self, value)
        import tensorflow as tf

        def creator(next_creator, **options):
            options["synchronization"] = tf.VariableSynchronization.ON_READ
            return next_creator(**options)

        with tf.variable_creator_scope(creator):
            return initialize(self, value)

    return method
