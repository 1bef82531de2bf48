"""Weak scaling as one switch: `tfdist.init(weak_scaling=True)`.

By default the script's `batch_size` is the global batch: N replicas train the math one device
trains (strong scaling). With weak scaling each replica takes the script's batch, so the global
batch is N times it, and the rate the script compiles with is scaled to match (rt.scale_lr's
rule, `tfdist.init(lr_scaling=...)`: linear ηN by default, sqrt η√N, none). Both come from hooks
on the script's own `compile` and `fit` (tfdist.keras_compat.user_fit):

- compile: the optimizer's constant rate times the factor, once per optimizer (a compile again
  with the same optimizer does not scale it again); a rate schedule is refused with what to write;
- fit: `batch_size` (Keras's default 32 where not given) and `validation_batch_size` times the
  replicas. A `tf.data.Dataset` brings its own batch, which fit cannot change: it is refused
  with what to write (batch it by the global batch, or `rt.dataset`).
"""

from __future__ import annotations

import logging

from tfdist.errors import ConfigError
from tfdist.keras_compat import adapter, user_fit

log = logging.getLogger("tfdist")

_MARK = "_tfdist_weak_scaled"
_state: dict = {}


class WeakScalingError(ConfigError):
    """What weak scaling cannot scale by itself."""


def install(enabled: bool, replicas: int, lr_factor: float) -> None:
    """Weak scaling on (`enabled`) or off, for `replicas` replicas in sync, the rate times
    `lr_factor`. Registered either way, so its place among the hooks (before those that read
    the global batch) does not depend on the switch."""
    _state.clear()
    _state.update(enabled=enabled and replicas > 1, replicas=replicas, lr_factor=lr_factor)
    user_fit.on("compile", __name__, _compile)
    user_fit.on("fit", __name__, _fit)
    if _state["enabled"]:
        log.info("weak scaling: each of the %d replicas takes fit's batch_size; the rate times %g",
                 replicas, lr_factor)


def _compile(call: user_fit.Call) -> None:
    if not _state.get("enabled"):
        return
    optimizer = adapter(call.model).optimizer(call.get("optimizer", "rmsprop"))
    call.arguments["optimizer"] = optimizer
    if getattr(optimizer, _MARK, False):
        return
    # Both Kerases keep a schedule as itself in `_learning_rate` (a variable otherwise).
    rate = getattr(optimizer, "_learning_rate", optimizer.learning_rate)
    if _is_schedule(rate):
        raise WeakScalingError(
            f"weak_scaling=True scales a constant learning rate; {type(optimizer).__name__} has "
            f"a schedule ({type(rate).__name__}). Fix: build the schedule from "
            "rt.scale_lr(initial_rate) and pass tfdist.init(lr_scaling=\"none\"), or use a "
            "constant rate.")
    current = optimizer.learning_rate  # a variable (mirrored under tf-keras): its value
    current = float(current.numpy() if hasattr(current, "numpy") else current)
    optimizer.learning_rate = current * _state["lr_factor"]
    setattr(optimizer, _MARK, True)


def _is_schedule(rate) -> bool:
    return any(cls.__name__ == "LearningRateSchedule" for cls in type(rate).__mro__)


def _fit(call: user_fit.Call) -> None:
    if not _state.get("enabled"):
        return
    import tensorflow as tf

    for name in ("x", "validation_data"):
        data = call.get(name)
        if isinstance(data, tf.data.Dataset) or (isinstance(data, tuple) and data
                                                 and isinstance(data[0], tf.data.Dataset)):
            raise WeakScalingError(
                f"weak_scaling=True multiplies fit's batch_size by the {_state['replicas']} "
                f"replicas, but fit's {name} is a tf.data.Dataset, whose batch is global and its "
                "own. Fix: batch it by the per-replica batch times rt.num_replicas (or build it "
                "with rt.dataset), or pass NumPy arrays.")
    replicas = _state["replicas"]
    call.arguments["batch_size"] = (call.get("batch_size") or 32) * replicas
    if call.get("validation_batch_size"):
        call.arguments["validation_batch_size"] = call.get("validation_batch_size") * replicas
