"""Keras 3's fit, evaluate and predict given a distributed dataset (what rt.dataset returns under
a strategy): 3.9's one change carried back to the releases before it, else a clear refusal.

Keras 3 takes a `tf.distribute` distributed dataset from 3.9 on: the only change to its data
adapters between 3.8 and 3.9 is one name, DistributedDatasetsFromFunction, added to the classes
its `is_tf_dataset` accepts (every later step already takes a `tf.distribute.DistributedDataset`,
of which that class is one). Before, `fit` stops with "Unrecognized data type", which names no
cause and no fix (measured: Keras 3.8.0, TensorFlow 2.18.1, `tfdist train --keras=3
--strategy=multi_worker`).

- `accept_datasets_from_function`: where `is_tf_dataset` is code tfdist knows
  (keras_compat.known_sources: that of Keras 3.0 to 3.8, and of 3.9 on, which accepts the class
  already), it also accepts that class.
- `apply`: fit, evaluate and predict ask Keras's own (possibly corrected) `is_tf_dataset`, and a
  Keras that still takes no distributed dataset (code tfdist does not know) gets an error naming
  the fix instead of "Unrecognized data type".
"""

from __future__ import annotations

import functools

from tfdist.errors import ConfigError
from tfdist.keras_compat.known_sources import known

_MARK = "_tfdist_distributed_input"
DISTRIBUTED = ("DistributedDataset", "DistributedDatasetsFromFunction")


class DistributedInputUnsupported(ConfigError):
    """This Keras 3 cannot take a distributed dataset in fit, evaluate or predict."""


def accept_datasets_from_function(adapters) -> None:
    """Correct `adapters` (keras.src.trainers.data_adapters) in place, once: its `is_tf_dataset`
    also accepts a DistributedDatasetsFromFunction where it is code tfdist ran this on. Looked up
    by name at each call (get_data_adapter, and `apply`'s check)."""
    original = adapters.is_tf_dataset
    if getattr(original, _MARK, False) or not known("is_tf_dataset", original):
        return  # unknown code is left alone (and refused by `apply` where it takes no dataset)

    @functools.wraps(original)
    def is_tf_dataset(x):
        return original(x) or any(parent.__name__ == "DistributedDatasetsFromFunction"
                                  and "tensorflow.python." in str(parent.__module__)
                                  for parent in type(x).__mro__)

    setattr(is_tf_dataset, _MARK, True)
    adapters.is_tf_dataset = is_tf_dataset


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
                    f"{type(x).__name__}, what rt.dataset returns under a strategy), and its "
                    "`is_tf_dataset` is code tfdist does not correct. Fix: install a Keras that "
                    "takes one (`pip install 'keras>=3.9'`), or give model.fit the "
                    "tf.data.Dataset itself (Keras distributes it), or build the model with "
                    "tf-keras (`export TF_USE_LEGACY_KERAS=1` and `from tensorflow import "
                    "keras`).")
        return keras_method(self, *args, **kwargs)

    setattr(method, _MARK, True)
    return method
