"""tfdist's callback base (tfdist.keras_compat.callback) inside both Kerases' CallbackLists: the
hooks a callback overrides are called, and one that overrides no batch hook keeps tf-keras's
per-batch machinery off and Keras 3's asynchronous dispatch on, as Keras's own base does."""

import types

import pytest

import tfdist  # noqa: F401  (before TensorFlow, as a user script starts)
from tfdist.keras_compat.callback import Callback

MODEL = types.SimpleNamespace()  # a CallbackList sets model.history


class EpochsOnly(Callback):

    def __init__(self):
        super().__init__()
        self.calls = []

    def on_epoch_end(self, epoch, logs=None):
        self.calls.append(("epoch_end", epoch))


class Batches(EpochsOnly):

    def on_train_batch_end(self, batch, logs=None):
        self.calls.append(("train_batch_end", batch))


class OldName(EpochsOnly):

    def on_batch_begin(self, batch, logs=None):  # the older name of on_train_batch_begin
        self.calls.append(("batch_begin", batch))


def callback_list(keras: int, callbacks):
    if keras == 2:
        import tf_keras

        return tf_keras.callbacks.CallbackList(callbacks, add_history=True, model=MODEL)
    import keras as keras3

    return keras3.callbacks.CallbackList(callbacks, add_history=True, model=MODEL)


def one_epoch(callbacks) -> None:
    callbacks.on_train_begin()
    callbacks.on_epoch_begin(0)
    for batch in range(2):
        callbacks.on_train_batch_begin(batch)
        callbacks.on_train_batch_end(batch, {"loss": 1.0})
    callbacks.on_epoch_end(0, {"loss": 1.0})
    callbacks.on_train_end()


def batch_hooks_on(keras: int, callbacks) -> bool:
    """Whether the list calls its items per batch (tf-keras), or would dispatch its batch hooks
    in step (Keras 3's test for its asynchronous dispatch, which its TensorFlow backend never
    takes)."""
    if keras == 2:
        return callbacks._should_call_train_batch_hooks
    from keras.src.utils import is_default

    return not all(
        is_default(cb.on_batch_end) and is_default(cb.on_train_batch_end)
        for cb in callbacks.callbacks)


@pytest.mark.parametrize("keras", [2, 3])
def test_the_hooks_a_callback_overrides_are_called_and_only_they_cost_per_batch(keras):
    quiet, batches, old = EpochsOnly(), Batches(), OldName()
    listed = callback_list(keras, [quiet])
    assert not batch_hooks_on(keras, listed)
    one_epoch(listed)
    assert quiet.calls == [("epoch_end", 0)]

    listed = callback_list(keras, [quiet, batches, old])
    assert batch_hooks_on(keras, listed)
    one_epoch(listed)
    assert batches.calls == [("train_batch_end", 0), ("train_batch_end", 1), ("epoch_end", 0)]
    assert old.calls == [("batch_begin", 0), ("batch_begin", 1), ("epoch_end", 0)]


@pytest.mark.parametrize("keras", [2, 3])
def test_set_model_and_params_reach_the_callback(keras):
    callback = EpochsOnly()
    listed = callback_list(keras, [callback])
    model = types.SimpleNamespace()
    listed.set_model(model)
    listed.set_params({"epochs": 3, "steps": 2, "verbose": 0})
    assert callback.model is model
    assert callback.params == {"epochs": 3, "steps": 2, "verbose": 0}
