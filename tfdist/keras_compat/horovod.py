"""Horovod's Keras API for Keras 3 objects: the optimizer and callbacks Horovod has for Keras 2.

Horovod 0.28's `DistributedOptimizer` averages gradients in Keras 2 optimizer hooks
(`get_gradients`, `_aggregate_gradients`, `_compute_gradients`) that a Keras 3 optimizer never
calls: Keras 3 takes gradients in `apply(grads, trainable_variables)`, from `apply_gradients`,
from `fit`'s train step and from custom loops alike. Its callbacks use `var.ref()`, `optimizer.lr`
and `optimizer.variables()`, which Keras 3 objects lack (horovod#4290). Here:

- `distributed_optimizer`: the Keras 3 counterpart of `hvd.DistributedOptimizer` (same arguments):
  a new optimizer of the same class and config whose `apply` first averages the gradients with
  Horovod's own gradient all-reduce (the one its DistributedOptimizer uses: compression, sparse
  gradients, groups, process sets).
- Mixed precision: a `LossScaleOptimizer` (also the one Keras 3's `compile` wraps around the
  optimizer under the `mixed_float16` policy) around a distributed optimizer all-reduces the
  scaled gradients before its finiteness check, so every rank skips or applies the same step
  (else one rank would wait in an all-reduce the other never starts).
- The Keras 3 halves of Horovod's callbacks (broadcast, learning-rate schedule and warm-up), which
  tfdist.keras_compat.horovod_binding dispatches to when the callback's model is a Keras 3 model.

Imported only when Horovod is used with Keras 3 (it imports TensorFlow and Horovod).
"""

from __future__ import annotations

import contextlib
import functools
import logging

import horovod.tensorflow as hvd
import tensorflow as tf

from tfdist.errors import ConfigError
from tfdist.keras_compat import keras3_loaded
from tfdist.keras_compat.known_sources import known, unknown
from tfdist.keras_compat.modules import LOSS_SCALE

log = logging.getLogger("tfdist")

_MARK = "_tfdist_horovod"
# The corrected LossScaleOptimizer.apply decides on the gradients it is given and hands the same
# gradients (unscaled) to inner_optimizer.apply: the code tfdist.keras_compat.known_sources knows.
LOSS_SCALE_APPLY = "LossScaleOptimizer.apply"


class HorovodKeras3Error(ConfigError):
    """A Keras 3 object that Horovod's Keras API cannot take as it is."""


# ---------------------------------------------------------------------------------------------
# The optimizer


class _Reducer:
    """What a distributed Keras 3 optimizer needs to average its gradients (kept in one plain
    object: Keras 3 optimizers track lists and sets assigned to them)."""

    def __init__(self, allreduce, process_set, scale_local_gradients):
        self.allreduce = allreduce
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self.local = set()  # refs of worker-local variables (register_local_var)
        self.bypass = 0  # > 0 while a LossScaleOptimizer has reduced the gradients already

    def __call__(self, grads, variables):
        variables = [_tf_variable(v) for v in variables]
        shared = [i for i, v in enumerate(variables) if v.ref() not in self.local]
        out = list(grads)
        if shared:
            reduced = self.allreduce([grads[i] for i in shared], [variables[i] for i in shared])
            for i, grad in zip(shared, reduced):
                out[i] = grad
        if self.scale_local_gradients and len(shared) < len(grads):
            size = float(self.process_set.size())
            for i in set(range(len(grads))) - set(shared):
                grad = out[i]
                if isinstance(grad, tf.IndexedSlices):
                    out[i] = tf.IndexedSlices(grad.values / size, grad.indices, grad.dense_shape)
                elif grad is not None:
                    out[i] = grad / size
        return out

    @contextlib.contextmanager
    def bypassed(self):
        self.bypass += 1
        try:
            yield
        finally:
            self.bypass -= 1


class DistributedKeras3Optimizer:
    """Mixed into the class of the optimizer that `distributed_optimizer` wraps."""

    def apply(self, grads, trainable_variables=None):
        reducer = getattr(self, _MARK)
        if not reducer.bypass and len(grads):
            variables = (self._trainable_variables
                         if trainable_variables is None else list(trainable_variables))
            grads = reducer(list(grads), variables)
        return super().apply(grads, trainable_variables)

    def register_local_var(self, var):
        """Horovod's: the gradient of `var` stays this rank's own (not averaged)."""
        getattr(self, _MARK).local.add(_tf_variable(var).ref())


def _tf_variable(var):
    """The tf.Variable behind a Keras 3 variable (TensorFlow backend). By what it has, not by
    class: in Keras 3.5 and 3.6 a layer's weights are not `keras.Variable`s (that is a subclass
    of their class there), and reached Horovod unwrapped ('Variable' has no attribute 'ref')."""
    if not hasattr(var, "ref") and hasattr(var, "value"):
        return var.value
    return var


@functools.lru_cache(maxsize=None)
def _distributed_class(cls):
    # The same name and module as the user's class: a saved model names the optimizer as usual
    # and loads without Horovod (as Horovod's own DistributedOptimizer does for Keras 2).
    return type(cls.__name__, (DistributedKeras3Optimizer, cls), {"__module__": cls.__module__})


def distributed_optimizer(optimizer,
                          name=None,
                          device_dense="",
                          device_sparse="",
                          compression=None,
                          sparse_as_dense=False,
                          gradient_predivide_factor=1.0,
                          op=None,
                          backward_passes_per_step=1,
                          average_aggregated_gradients=False,
                          num_groups=0,
                          groups=None,
                          process_set=None,
                          scale_local_gradients=True):
    """`hvd.DistributedOptimizer` for a Keras 3 optimizer: a new optimizer of the same class and
    config whose `apply` averages the gradients across the ranks with Horovod's all-reduce."""
    compression = hvd.Compression.none if compression is None else compression
    op = hvd.Average if op is None else op
    process_set = hvd.global_process_set if process_set is None else process_set
    if op not in (hvd.Average, hvd.Sum):
        raise HorovodKeras3Error(f"op={op!r}: Horovod's DistributedOptimizer takes hvd.Average "
                                 "or hvd.Sum.")
    if backward_passes_per_step != 1:
        raise HorovodKeras3Error(
            f"backward_passes_per_step={backward_passes_per_step} with a Keras 3 optimizer: "
            "Horovod accumulates gradients in Keras 2 optimizer hooks that Keras 3 does not "
            "call. Use Keras 3's own accumulation instead: "
            f"`{type(optimizer).__name__}(..., gradient_accumulation_steps="
            f"{backward_passes_per_step})` and backward_passes_per_step=1. It updates with the "
            "mean of the accumulated gradients (Horovod's average_aggregated_gradients=True; "
            "Horovod's default sums them), all-reduced every step.")
    if getattr(optimizer, "built", False):
        raise HorovodKeras3Error(
            f"The {type(optimizer).__name__} optimizer already has its variables (it was built "
            "or used): wrap it with DistributedOptimizer before compile, fit or apply, as "
            "Horovod's examples do.")
    if isinstance(optimizer, DistributedKeras3Optimizer):
        raise HorovodKeras3Error(f"The {type(optimizer).__name__} optimizer is distributed "
                                 "already: wrap it once.")
    groups = groups if groups is not None else (num_groups or None)
    if isinstance(groups, list):
        groups = [[_tf_variable(v) for v in group] for group in groups]
    label = name or f"Distributed{type(optimizer).__name__}"
    allreduce = hvd._make_allreduce_grads_fn(label, device_dense, device_sparse, compression,
                                             sparse_as_dense, op, gradient_predivide_factor, groups,
                                             process_set)
    correct_loss_scale_optimizer()
    wrapped = _distributed_class(type(optimizer)).from_config(optimizer.get_config())
    setattr(wrapped, _MARK, _Reducer(allreduce, process_set, scale_local_gradients))
    return wrapped


# ---------------------------------------------------------------------------------------------
# Mixed precision: one finite/non-finite decision on every rank


def correct_loss_scale_optimizer() -> None:
    """Make Keras 3's LossScaleOptimizer around a distributed optimizer all-reduce the (scaled)
    gradients before its finiteness check (idempotent)."""
    keras = keras3_loaded()
    lso = keras.optimizers.LossScaleOptimizer
    if getattr(lso.apply, _MARK, False):
        return
    if not known(LOSS_SCALE_APPLY, lso.apply):
        raise HorovodKeras3Error(
            unknown((LOSS_SCALE_APPLY, ), LOSS_SCALE, keras.__version__,
                    "so that its mixed_float16 step is the same on every "
                    "Horovod rank (the gradients all-reduced before the finite check)",
                    "use tf-keras (`from tensorflow import keras`)").args[0])
    apply = lso.apply

    @functools.wraps(apply)
    def agreed_apply(self, grads, trainable_variables=None):
        inner = self.inner_optimizer
        if not isinstance(inner, DistributedKeras3Optimizer) or not len(grads):
            return apply(self, grads, trainable_variables)
        reducer = getattr(inner, _MARK)
        if reducer.bypass:  # an enclosing LossScaleOptimizer reduced them
            return apply(self, grads, trainable_variables)
        if trainable_variables is not None:
            trainable_variables = list(trainable_variables)
            variables = trainable_variables
        else:
            variables = inner._trainable_variables
        grads = reducer(list(grads), variables)  # inf/nan on any rank: on every rank
        with reducer.bypassed():
            return apply(self, grads, trainable_variables)

    setattr(agreed_apply, _MARK, True)
    lso.apply = agreed_apply


# ---------------------------------------------------------------------------------------------
# Horovod's callbacks with a Keras 3 model (called with the Horovod callback as `cb`)


def local_variable_ref(var):
    """What BroadcastGlobalVariablesCallback.register_local_var keeps for a Keras 3 variable."""
    return _tf_variable(var).ref()


def broadcast_model_and_optimizer(cb) -> None:
    """BroadcastGlobalVariablesCallback.on_batch_end: every model and optimizer variable from
    the root rank, once (after the first batch, when Keras 3 has built the optimizer)."""
    if cb.broadcast_done:
        return
    model = cb.model
    variables = [_tf_variable(v) for v in model.variables]
    variables = [v for v in variables if v.ref() not in cb._local_vars]
    with tf.device(cb.device):
        hvd.broadcast_variables(variables, root_rank=cb.root_rank)
        if model.optimizer is not None:
            hvd.broadcast_variables([_tf_variable(v) for v in model.optimizer.variables],
                                    root_rank=cb.root_rank)
    cb.broadcast_done = True


def get_lr(optimizer) -> float:
    lr = optimizer.learning_rate  # Keras 3 has no `lr`
    return float(lr.numpy() if hasattr(lr, "numpy") else lr)


def set_lr(optimizer, value: float) -> None:
    try:
        optimizer.learning_rate = value
    except TypeError as err:  # a LearningRateSchedule
        raise HorovodKeras3Error(
            f"Horovod's learning-rate callbacks set the rate each batch, but this optimizer's "
            f"learning rate is a schedule ({err}). Pass a float learning rate, or drop the "
            "callback and let the schedule do the warm-up.") from None


def adjust_learning_rate(cb, epoch) -> None:
    """LearningRateScheduleCallback._adjust_learning_rate: the rate, and momentum correction
    where momentum is a variable (Keras 3's SGD and RMSprop keep a float, fixed when the step was
    traced: tfdist.keras_compat.horovod_binding skips the correction there with a warning)."""
    optimizer = cb.model.optimizer
    old_lr = get_lr(optimizer)
    new_lr = cb.initial_lr * cb.multiplier(epoch)
    set_lr(optimizer, new_lr)
    momentum = getattr(optimizer, "momentum", None)
    if cb.momentum_correction and hasattr(momentum, "assign") and old_lr:
        cb.restore_momentum = float(momentum.numpy())
        momentum.assign(cb.restore_momentum * new_lr / old_lr)


def restore_momentum(cb) -> None:
    if cb.restore_momentum:
        cb.model.optimizer.momentum.assign(cb.restore_momentum)
        cb.restore_momentum = None


def average_metrics_in_place(logs) -> None:
    """MetricAverageCallback's averaging where Horovod's Keras API is bound to Keras 3, whose
    backend has no `constant`: Horovod's own reduction, every metric in name order."""
    for metric, value in sorted((logs or {}).items()):
        logs[metric] = hvd.allreduce(tf.constant(value, name=metric)).numpy()


# ---------------------------------------------------------------------------------------------
# Horovod's TensorFlow API (`import horovod.tensorflow as hvd`) with Keras 3 variables


def tf_variables(variables):
    """`variables` with each Keras 3 variable replaced by the tf.Variable behind it: what
    Horovod's `broadcast_variables` and `DistributedGradientTape` take (they call `var.ref()`,
    which a Keras 3 variable lacks: horovod#4290). Anything else is returned as it is."""
    if keras3_loaded() is None or not isinstance(variables, (list, tuple)):
        return variables
    return type(variables)(_tf_variable(v) for v in variables)


def correct_tensorflow_api(module) -> None:
    """`horovod.tensorflow`'s broadcast_variables and DistributedGradientTape (gradient,
    register_local_source) take Keras 3 variables, as a GradientTape script on Keras 3 passes
    them (`model.variables`, `model.trainable_variables`, `optimizer.variables`)."""
    functions = __import__("horovod.tensorflow.functions", fromlist=["broadcast_variables"])
    broadcast = functions.broadcast_variables
    if getattr(broadcast, _MARK, False):
        return

    @functools.wraps(broadcast)
    def broadcast_variables(variables, *args, **kwargs):
        return broadcast(tf_variables(variables), *args, **kwargs)

    setattr(broadcast_variables, _MARK, True)
    functions.broadcast_variables = module.broadcast_variables = broadcast_variables
    tape = getattr(module, "_DistributedGradientTape", None)  # defined where TF2 runs eagerly
    if tape is None:
        return
    gradient, register = tape.gradient, tape.register_local_source

    @functools.wraps(gradient)
    def tape_gradient(self, target, sources, *args, **kwargs):
        return gradient(self, target, tf_variables(sources), *args, **kwargs)

    @functools.wraps(register)
    def register_local_source(self, source):
        return register(self, _tf_variable(source))

    tape.gradient, tape.register_local_source = tape_gradient, register_local_source
