"""Keras 3's fit, evaluate and predict given a distributed dataset (what rt.dataset returns under
a strategy): a clear refusal where this Keras cannot take one.

Keras 3 takes a `tf.distribute` distributed dataset from 3.9 on (its data adapters' `is_tf_dataset`
names DistributedDatasetsFromFunction from then). Before, `fit` stops with "Unrecognized data
type", which names no cause and no fix (measured: Keras 3.8.0, TensorFlow 2.18.1, `tfdist train
--keras=3 --strategy=multi_worker`). The check asks Keras's own `is_tf_dataset`, not a version.
"""

from __future__ import annotations

import functools

from tfdist.errors import ConfigError

_MARK = "_tfdist_distributed_input"
DISTRIBUTED = ("DistributedDataset", "DistributedDatasetsFromFunction")


class DistributedInputUnsupported(ConfigError):
    """This Keras 3 cannot take a distributed dataset in fit, evaluate or predict."""


def apply(trainer) -> None:
    """Check the input of `trainer.TensorFlowTrainer`'s fit, evaluate and predict (idempotent)."""
    cls = trainer.TensorFlowTrainer
    if getattr(cls.fit, _MARK, False):
        return
    for name in ("fit", "evaluate", "predict"):
        setattr(cls, name, _checked(getattr(cls, name), name))


def _checked(keras_method, name: str):

    @functools.wraps(keras_method)
    def method(self, *args, **kwargs):
        x = args[0] if args else kwargs.get("x")
        if type(x).__name__ in DISTRIBUTED:
            from keras.src.trainers.data_adapters import is_tf_dataset

            if not is_tf_dataset(x):
                import keras

                raise DistributedInputUnsupported(
                    f"Keras {keras.__version__}'s `{name}` takes no distributed dataset (a "
                    f"{type(x).__name__}, what rt.dataset returns under a strategy); Keras takes "
                    "one from 3.9 on. Fix: install a newer Keras (`pip install 'keras>=3.9'`), "
                    "or give model.fit the tf.data.Dataset itself (Keras distributes it), or "
                    "build the model with tf-keras (`export TF_USE_LEGACY_KERAS=1` and `from "
                    "tensorflow import keras`).")
        return keras_method(self, *args, **kwargs)

    setattr(method, _MARK, True)
    return method
