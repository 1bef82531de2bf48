"""Keras 3 before 3.8 under several replicas in sync: the gradients of the replicas add up instead
of averaging, so tfdist refuses to train there.

tf.distribute sums the replicas' gradients. Keras 3.8 therefore scales each replica's loss by
1 / num_replicas_in_sync before taking gradients (`keras.src.losses.loss.
scale_loss_for_distribution`), as tf-keras always has, and the step is that of the global batch's
mean loss. Keras 3.0 to 3.7 do not scale: with N replicas each step applies N times that gradient,
as if the learning rate were N times the one the user set. Nothing fails; the model trains to
other weights. Measured with TensorFlow 2.18.1: on Keras 3.5.0, 3.6.0 and 3.7.0, the weights of 2
workers differed from those of 1 worker on the same global batch by up to 24 % of their scale
(tests/distribute/test_same_math.py); on 3.8.0 they agreed within 1e-5.

Under one replica (one task, parameter servers, Horovod, whose optimizer averages the gradients
itself) nothing is summed and nothing is refused. The check asks Keras whether it has the
function, not which version it is.
"""

from __future__ import annotations

import functools

from tfdist.errors import ConfigError

_MARK = "_tfdist_replica_loss"


class KerasReplicaLossUnscaled(ConfigError):
    """This Keras 3 adds up the gradients of several replicas instead of averaging them."""


def scales_loss() -> bool:
    """Whether this Keras scales each replica's loss by 1 / num_replicas_in_sync (3.8 on)."""
    from keras.src.losses import loss

    return hasattr(loss, "scale_loss_for_distribution")


def apply(trainer) -> None:
    """Check `trainer.TensorFlowTrainer`'s fit and train_on_batch (idempotent)."""
    cls = trainer.TensorFlowTrainer
    if getattr(cls.fit, _MARK, False):
        return
    for name in ("fit", "train_on_batch"):
        setattr(cls, name, _checked(getattr(cls, name), name))


def _checked(keras_method, name: str):

    @functools.wraps(keras_method)
    def method(self, *args, **kwargs):
        replicas = self.distribute_strategy.num_replicas_in_sync
        if replicas > 1 and not scales_loss():
            import keras

            raise KerasReplicaLossUnscaled(
                f"Keras {keras.__version__}'s `{name}` adds up the gradients of the "
                f"{replicas} replicas of {type(self.distribute_strategy).__name__} instead of "
                "averaging them (Keras scales each replica's loss from 3.8 on): the model would "
                f"train as if the learning rate were {replicas} times yours. Fix: install a "
                "newer Keras (`pip install 'keras>=3.8'`), or build the model with tf-keras "
                "(`export TF_USE_LEGACY_KERAS=1` and `from tensorflow import keras`), or train "
                "with --strategy=horovod, whose optimizer averages the gradients.")
        return keras_method(self, *args, **kwargs)

    setattr(method, _MARK, True)
    return method
