"""The engine's strategy as the program's default, and the one way out of it.

`tfdist.init()` makes the strategy of a training task the program's default
(`tf.distribute.experimental_set_strategy`), so that the model, optimizer and metrics an
unchanged script builds afterwards live under it, without `with rt.scope()`. That scope stays
valid: TensorFlow lets the same strategy's scope be entered again and then changes nothing.
TensorFlow's own default strategy (Horovod's, one device's) is left as it is.

TensorFlow keeps the default per thread: the thread that called tfdist.init() (a script's main
thread) builds under it, other threads do not.

A script that makes its own strategy after tfdist.init() (TensorFlow's tutorials do, e.g. a
ParameterServerStrategy over the TF_CONFIG tfdist exported) uses that one: entering its scope
first clears tfdist's default, which TensorFlow would otherwise refuse to mix with it ("Mixing
different tf.distribute.Strategy objects"). Whether a model made there may train is the fit
guard's question (tfdist.keras_compat.strategy_guard).

Under MultiWorkerMirrored every variable made under the strategy is made by a collective (the
chief broadcasts its initial value), so a variable that only some tasks make, or make in another
order, hangs the job or mixes up the collectives ("Collective instance ... expected type").
What tfdist makes for one task alone (its checkpoint's epoch and step, the input counter) or as
a plain copy of a model (`tfdist train`'s evaluation copy, which only the chief saves) is made in
`outside()`: no strategy, plain local variables, as in a program without tfdist.

TensorFlow imported inside the functions: `import tfdist` stays cheap.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading

from tfdist.errors import ConfigError

log = logging.getLogger("tfdist")

_set: list = []  # the strategy tfdist.init() made the default, if any
_outside = threading.local()  # depth: outside() blocks this thread is in
_MARK = "_tfdist_steps_aside"


def make_default(strategy) -> None:
    """Make `strategy` the program's default (this thread's); TensorFlow's own default strategy
    (or None) changes nothing. A default tfdist set before (an earlier tfdist.init()) is
    replaced."""
    import tensorflow as tf

    clear()
    if strategy is None or strategy is tf.distribute.get_strategy():
        return
    if tf.distribute.has_strategy():
        raise ConfigError(
            f"tfdist.init() ran inside `with {type(tf.distribute.get_strategy()).__name__}."
            "scope()`: it makes its own strategy the program's default, which TensorFlow refuses "
            "inside another scope. Fix: call tfdist.init() outside any strategy scope, right "
            "after the imports.")
    _step_aside_for_own_strategies()
    tf.distribute.experimental_set_strategy(strategy)
    _set.append(strategy)


def clear() -> None:
    """Undo make_default (nothing when tfdist set no default)."""
    import tensorflow as tf

    if _set and _global_scope() is not None and tf.distribute.get_strategy() is _set[-1]:
        tf.distribute.experimental_set_strategy(None)
    _set.clear()


@contextlib.contextmanager
def outside():
    """No distribution strategy inside (this thread's default cleared), the default restored on
    leaving: what is built here is plain and local to this task. Also inside `with rt.scope()`
    (entered over the default it is a count, not a scope of its own). Call it in eager code, not
    inside a `tf.device` block or a traced function."""
    import tensorflow as tf

    _outside.depth = getattr(_outside, "depth", 0) + 1
    try:
        if _global_scope() is None:
            yield
            return
        strategy = tf.distribute.get_strategy()
        tf.distribute.experimental_set_strategy(None)
        try:
            yield
        finally:
            tf.distribute.experimental_set_strategy(strategy)
    finally:
        _outside.depth -= 1


def is_outside() -> bool:
    """Whether this thread is inside outside(): what tfdist builds there for this task alone
    (e.g. tfdist train's evaluation copy) is left plain by the hooks on compile and fit, also
    under Horovod, whose strategy is TensorFlow's default."""
    return getattr(_outside, "depth", 0) > 0


def _step_aside_for_own_strategies() -> None:
    """Wrap tf.distribute.Strategy.scope (once): the scope of a strategy the script made itself
    clears tfdist's default first (of this thread, where it is the default)."""
    from tensorflow.python.distribute import distribute_lib

    base = distribute_lib.StrategyBase
    if getattr(base.scope, _MARK, False):
        return
    tf_scope = base.scope

    @functools.wraps(tf_scope)
    def scope(self):
        ours = _set[-1] if _set else None
        if (ours is not None and self is not ours and _global_scope() is not None
                and distribute_lib.get_strategy() is ours
                and self is not distribute_lib._get_default_strategy()):
            log.info(
                "the script entered the scope of its own %s: tfdist's %s is no longer the "
                "program's default strategy.",
                type(self).__name__,
                type(ours).__name__)
            clear()
        return tf_scope(self)

    setattr(scope, _MARK, True)
    base.scope = scope


def _global_scope():
    """The scope experimental_set_strategy entered on this thread's default graph, or None."""
    from tensorflow.python.framework import ops

    return getattr(ops.get_default_graph(), "_global_distribute_strategy_scope", None)
