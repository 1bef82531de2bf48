"""Keras 3's fit and evaluate with steps_per_execution > 1 under several replicas: the steps of a
call run in a plain loop, as tf-keras runs them, instead of Keras 3's loop that fails there.

Keras 3 runs a call's steps in a `tf.while_loop` whose body runs each step inside a `tf.cond`
(whether the input still had a batch). Under a strategy with several replicas in sync the first
call fails: `INVALID_ARGUMENT: You must feed a value for placeholder tensor
'while/body/_1/while/cond/then/.../Placeholder'`. Measured (2026-11-28, TensorFlow 2.18.1 and
2.21.0): Keras 3.8.0 and 3.15.1 without tfdist, MirroredStrategy over 2 logical CPUs,
`compile(steps_per_execution=2)`; with tfdist the same under MultiWorkerMirroredStrategy with 2
workers (keras-team/keras#19246 reports the error). One replica trains; tf-keras, whose loop is
`for _ in tf.range(steps_per_execution)`, trains under both.

Corrected where it would fail (steps_per_execution > 1, several replicas in sync): the function
`_make_function` makes runs the first step and then the others in a `tf.range` loop, each step as
Keras's own one-step function runs it (`strategy.run`, `reduce_per_replica`). A call runs the
steps left in its input's pass where Keras knows how many there are (tfdist.keras_compat.call_steps:
a loop that asks for a batch past the end has counted an optimizer step it did not train);
otherwise steps_per_execution, and an input that runs out mid-call raises OutOfRangeError, which
Keras's epoch iterator takes as the epoch's end. Everywhere else Keras's own function runs. Tied to
the source of `TensorFlowTrainer._make_function` and of the epoch iterator that call_steps wraps
(keras_compat.known_sources): on code tfdist did not run this on, the call that would fail is
refused with the fix instead.
"""

from __future__ import annotations

import functools
import importlib.metadata

from tfdist.keras_compat import call_steps
from tfdist.keras_compat.known_sources import known, unknown
from tfdist.keras_compat.modules import EPOCH_ITERATOR, TRAINER

NAME = "TensorFlowTrainer._make_function"
_MARK = "_tfdist_multi_step"


def apply(trainer) -> None:
    """Correct `trainer` (keras.src.backend.tensorflow.trainer) in place, once."""
    cls = trainer.TensorFlowTrainer
    original = getattr(cls, "_make_function", None)
    if original is None or getattr(original, _MARK, False):
        return
    version = importlib.metadata.version("keras")
    cls._make_function = in_a_plain_loop(original, known(NAME, original), version, trainer)


def in_a_plain_loop(original, is_known: bool, version: str, trainer):

    @functools.wraps(original)
    def _make_function(self, step_function):
        function = original(self, step_function)
        if self.steps_per_execution == 1 or self.distribute_strategy.num_replicas_in_sync == 1:
            return function
        if not call_steps.noting():
            raise unknown(
                (call_steps.NAME, ), EPOCH_ITERATOR, version,
                f"to count the steps a call of steps_per_execution={self.steps_per_execution} "
                "may run before its input's end", "compile with steps_per_execution=1")
        if not is_known:
            raise unknown(
                (NAME, ), TRAINER, version,
                f"to run steps_per_execution={self.steps_per_execution} under "
                f"{self.distribute_strategy.num_replicas_in_sync} replicas (Keras 3.8 to 3.15 "
                "fail there: keras-team/keras#19246)", "compile with steps_per_execution=1")
        return _plain_loop(self, step_function, function, trainer)

    setattr(_make_function, _MARK, True)
    return _make_function


def _plain_loop(model, step_function, keras_function, trainer):
    """Keras's function for a call of steps_per_execution steps, the steps in a tf.range loop."""
    import tensorflow as tf

    strategy = model.distribute_strategy

    @tf.autograph.experimental.do_not_convert
    def one_step_on_data(data):
        outputs = strategy.run(step_function, args=(data, ))
        return trainer.reduce_per_replica(outputs, strategy, reduction="auto")

    if not model.run_eagerly:
        one_step_on_data = tf.function(one_step_on_data,
                                       reduce_retracing=True,
                                       jit_compile=model.jit_compile)
    convert = getattr(model, "_autoconvert_optionals", None)  # Keras 3.11 on: optional inputs
    if convert is not None:
        one_step_on_data = convert(one_step_on_data)

    def multi_step_on_iterator(iterator, count):
        outputs = one_step_on_data(iterator.get_next())
        for _ in tf.range(count - 1):
            outputs = one_step_on_data(iterator.get_next())
        return outputs

    if not model.run_eagerly:
        multi_step_on_iterator = tf.function(multi_step_on_iterator, reduce_retracing=True)

    def function(iterator):
        if isinstance(iterator, (tf.data.Iterator, tf.distribute.DistributedIterator)):
            calls = model.steps_per_execution
            count = call_steps.of_call(iterator) or calls  # None: not from Keras's loop
            return multi_step_on_iterator(iterator, tf.constant(count))
        return keras_function(iterator)  # Keras's loop over a Python iterator's batches

    return function
