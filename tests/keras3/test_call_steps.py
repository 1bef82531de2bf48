"""The steps each call of an epoch may run (tfdist.keras_compat.call_steps), read from Keras 3's
own epoch iterator over a real tf.data input."""

import types

import pytest

import tfdist  # noqa: F401  (corrects Keras 3 as it is imported)
from tfdist.keras_compat import call_steps


def _calls(epoch_iterator, epochs=1):
    """The steps noted for each call Keras's TensorFlow epoch iterator yields, each call taking
    that many batches, as tfdist's plain loops do (one past the end ends the epoch)."""
    import tensorflow as tf

    counts = []
    for _ in range(epochs):
        with epoch_iterator.catch_stop_iteration():
            for item in epoch_iterator:
                counts.append(call_steps.of_call(item[-1]))
                for _ in range(counts[-1]):
                    try:
                        item[-1].get_next()
                    except tf.errors.OutOfRangeError:
                        raise StopIteration
    return counts


@pytest.mark.parametrize("known_size", [True, False])
def test_the_last_call_of_a_pass_runs_the_steps_left(known_size):
    """10 batches at 4 a call: 4, 4, 2 each epoch. An input of unknown size: 4 a call, its end
    found by running out (Keras then counts 12 steps a pass: 4 a call again)."""
    import tensorflow as tf
    from keras.src.backend.tensorflow.trainer import TFEpochIterator

    data = tf.data.Dataset.range(40).batch(4)
    if not known_size:
        data = data.filter(lambda x: True)
    epoch_iterator = TFEpochIterator(x=data,
                                     steps_per_execution=4,
                                     distribute_strategy=tf.distribute.get_strategy())
    assert call_steps.noting()
    if known_size:
        assert _calls(epoch_iterator, epochs=2) == [4, 4, 2, 4, 4, 2]
    else:
        # The 3rd call runs out; then Keras knows 12 steps a pass.
        assert _calls(epoch_iterator, epochs=2) == [4, 4, 4, 4, 4, 4]


def test_steps_per_epoch_over_a_repeated_input_keeps_whole_calls():
    """steps_per_epoch=10 at 4 a call over an endless input: Keras 3 runs each call in full (12
    steps an epoch), and nothing is cut (that is Keras's own count, kept)."""
    import tensorflow as tf
    from keras.src.backend.tensorflow.trainer import TFEpochIterator

    epoch_iterator = TFEpochIterator(x=tf.data.Dataset.range(8).repeat().batch(4),
                                     steps_per_epoch=10,
                                     steps_per_execution=4,
                                     distribute_strategy=tf.distribute.get_strategy())
    assert _calls(epoch_iterator) == [4, 4, 4]


def test_a_call_not_made_from_the_epoch_iterator_is_not_counted():
    import tensorflow as tf
    from keras.src.backend.tensorflow.trainer import TFEpochIterator

    epoch_iterator = TFEpochIterator(x=tf.data.Dataset.range(8).batch(4),
                                     steps_per_execution=4,
                                     distribute_strategy=tf.distribute.get_strategy())
    for _ in epoch_iterator:
        assert call_steps.of_call(iter(tf.data.Dataset.range(2))) is None


def test_an_epoch_iterator_tfdist_does_not_know_is_left_alone():
    """Other code of `_enumerate_iterator`: not wrapped, nothing noted."""

    class EpochIterator:

        def _enumerate_iterator(self):  # not Keras's code
            yield 0, None

    module = types.SimpleNamespace(EpochIterator=EpochIterator)
    original = EpochIterator._enumerate_iterator
    call_steps.apply(module)
    assert EpochIterator._enumerate_iterator is original
