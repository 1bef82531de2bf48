"""How many steps a call of Keras 3's train or test function may run without reading past the end
of its input: what tfdist's plain loops (tfdist.keras_compat.multi_step, keras3_adapter's
instrument_steps) run instead of steps_per_execution.

A plain loop that asks its input for a batch past the end is not stopped cleanly there: the
OutOfRangeError ends the call, but the steps of a `tf.range` loop are not ordered after their
batch, and the optimizer's `iterations.assign_add(1)` of the step that found no batch has run
already. Measured (2026-11-28, Keras 3.8, mirrored over 2 logical CPUs, 57 batches a pass, 2
epochs, Adam): one step a call 114 iterations, 4 a call in the plain loop 116 and other weights
(Adam's bias correction and any schedule read the count). Keras's own loop asks for each batch as
an optional and stops at the end, which is what fails under several replicas.

Keras's epoch iterator knows the end where the input's number of batches is known: it yields the
iterator once per call, after counting the call's steps as seen (`_steps_seen`). Its
`_enumerate_iterator` is wrapped to note, for the iterator it yields, the steps left in the pass
(at most steps_per_execution); the plain loops run that many. Where the number is not known (an
input of unknown cardinality) a call runs steps_per_execution steps, and the end costs the count
one step as it does with one step a call (Keras's own function, the same 114 and 116 with an
input of unknown cardinality). Tied to the source of `EpochIterator._enumerate_iterator`
(keras_compat.known_sources): on code tfdist did not run this on, nothing is noted and the loops
say so. It also notes whether fit was given steps_per_epoch (only then does Keras 3 run an
epoch's last call in full past it: keras3_adapter.execution_misaligned).
"""

from __future__ import annotations

import functools
import threading
import weakref
from typing import Optional

from tfdist.keras_compat.known_sources import known

NAME = "EpochIterator._enumerate_iterator"
_MARK = "_tfdist_call_steps"
_last = threading.local()  # (a weak reference to the iterator yielded last, its call's steps)


def apply(module) -> None:
    """Wrap `module.EpochIterator._enumerate_iterator` (keras.src.trainers.epoch_iterator), once,
    where its code is code tfdist ran this on."""
    cls = module.EpochIterator
    original = getattr(cls, "_enumerate_iterator", None)
    if original is None or getattr(original, _MARK, False) or not known(NAME, original):
        return

    @functools.wraps(original)
    def _enumerate_iterator(self):
        for item in original(self):  # (step[, end step], iterator): its steps counted as seen
            _last.noted = (_reference(item[-1]), _steps_left(self))
            yield item

    setattr(_enumerate_iterator, _MARK, True)
    cls._enumerate_iterator = _enumerate_iterator
    made = cls.__init__

    @functools.wraps(made)
    def __init__(self, *args, **kwargs):
        made(self, *args, **kwargs)
        _last.steps_per_epoch_given = bool(self.steps_per_epoch)

    cls.__init__ = __init__


def _reference(iterator):
    try:
        return weakref.ref(iterator)  # fit's iterator is not kept alive after fit
    except TypeError:
        return None


def _steps_left(epoch_iterator) -> int:
    calls = epoch_iterator.steps_per_execution
    batches = epoch_iterator._num_batches  # None: not known (yet)
    if not batches:
        return calls
    return max(1, min(calls, batches - (epoch_iterator._steps_seen - calls)))


def of_call(iterator) -> Optional[int]:
    """The steps the call Keras is making with `iterator` may run (at most steps_per_execution);
    None where Keras's epoch iterator did not note it (its code unknown to tfdist, or a call not
    made from its loop)."""
    noted = getattr(_last, "noted", None)
    if noted is None or noted[0] is None or noted[0]() is not iterator:
        return None
    return noted[1]


def steps_per_epoch_given() -> Optional[bool]:
    """Whether the epoch iterator made last in this thread (fit's, from its callbacks'
    on_train_begin) was given steps_per_epoch, or only counts its input's batches; None: not
    noted (an epoch iterator tfdist does not know)."""
    return getattr(_last, "steps_per_epoch_given", None)


def noting() -> bool:
    """Whether this Keras's epoch iterator notes the steps of each call (its code is known)."""
    import importlib

    from tfdist.keras_compat.modules import EPOCH_ITERATOR

    return getattr(
        getattr(importlib.import_module(EPOCH_ITERATOR).EpochIterator, "_enumerate_iterator", None),
        _MARK, False)
