"""Keras 3's LossScaleOptimizer (mixed_float16) under a strategy with several replicas: one
finite/non-finite decision for all of them.

Keras 3.15's LossScaleOptimizer decides whether to apply a step or skip it (and halve the loss
scale) from `check_finite(grads)` on each replica's *own* gradients, before its inner optimizer
all-reduces them (keras/src/optimizers/loss_scale_optimizer.py, `_tf_apply`; its comment assumes
the gradients are all-reduced already, which Keras 3's optimizers do only later, in
`_backend_update_step`). When the gradients overflow on one replica only:

- MultiWorkerMirroredStrategy: the worker whose gradients are finite enters the inner optimizer's
  all-reduce, the other skips it: both wait in collectives that never match (measured on Keras
  3.15.1, TensorFlow 2.18.1, 2 workers: the job hung; tests/keras3/test_mixed_precision.py).
- MirroredStrategy with several devices: the decision is the first replica's; another replica's
  inf or nan is all-reduced into the weights.

tf-keras all-reduces before it decides, so every replica agrees. Corrected here the same way at
the smallest cost: `check_finite` all-reduces the count of replicas with non-finite gradients (one
scalar) and every replica skips when any has one. Under one replica (also Horovod, whose
agreement tfdist.keras_compat.horovod makes) Keras's own check runs unchanged.

Tied to the source of the two functions it relies on (keras_compat.known_sources): a Keras whose
code changed gets KerasCorrectionUnknown under several replicas, never a blind patch.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging

from tfdist.keras_compat.known_sources import KerasCorrectionUnknown, known, unknown
from tfdist.keras_compat.modules import LOSS_SCALE

log = logging.getLogger("tfdist")

# The functions whose code the correction relies on (tfdist.keras_compat.known_sources.RUN).
RELIES_ON = ("LossScaleOptimizer.check_finite", "LossScaleOptimizer._tf_apply")
_MARK = "_tfdist_loss_scale"


def apply(module) -> None:
    """Correct `module` (keras.src.optimizers.loss_scale_optimizer) in place, once."""
    cls = module.LossScaleOptimizer
    if getattr(cls.check_finite, _MARK, False):
        return
    version = importlib.metadata.version("keras")
    is_known = all(known(name, getattr(cls, name.split(".")[1], None)) for name in RELIES_ON)
    cls.check_finite = agreed_check_finite(cls.check_finite, is_known, version)


def _unknown(version: str) -> KerasCorrectionUnknown:
    return unknown(
        RELIES_ON, LOSS_SCALE, version,
        "so that every replica of a mixed_float16 model makes the same apply-or-skip decision "
        "(Keras decides on each replica's own gradients: a hang or inf weights when one replica "
        "overflows)", "use --mixed_precision=mixed_bfloat16 (no loss scaling), or tf-keras "
        "(`export TF_USE_LEGACY_KERAS=1` and `from tensorflow import keras`)")


def agreed_check_finite(original, is_known: bool, version: str):

    @functools.wraps(original)
    def check_finite(self, grads):
        import tensorflow as tf

        finite = original(self, grads)
        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return finite
        if not is_known:
            raise _unknown(version)
        overflowed = context.all_reduce("SUM", tf.cast(tf.logical_not(finite), tf.float32))
        return tf.equal(overflowed, 0.0)

    setattr(check_finite, _MARK, True)
    return check_finite
