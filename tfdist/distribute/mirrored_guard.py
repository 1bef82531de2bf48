"""The stop for a MirroredStrategy that a script makes after tfdist.init() built a strategy over
several processes.

keras.io's multi-GPU guide, and many scripts after it, make their own
`strategy = tf.distribute.MirroredStrategy()` and build the model in `with strategy.scope():`.
A MirroredStrategy holds the devices of one process; after tfdist.init() has started TensorFlow's
cluster runtime (a strategy over the tasks of a TF_CONFIG: multi_worker, parameter_server) the
process's devices are that cluster's, and what TensorFlow then makes of the call is no strategy
of the job (TensorFlow 2.18, measured 2026-11-27):
- multi_worker, 2 processes: the process dies with SIGSEGV inside `MirroredStrategy()` (its
  all-reduce's first variable), on every rank, with no message;
- parameter_server: the chief's MirroredStrategy takes the ps and worker tasks' CPUs as its own
  replicas (3 replicas for 3 processes), not parameter-server training;
- with explicit local devices (`MirroredStrategy(["/cpu:0"])`): one independent copy per process.
So after `install` such a call raises SecondStrategy, in the script's process at the call, on
every rank that makes it, before TensorFlow is touched. tfdist never swaps the script's strategy
for its own: the message says which line to write.

Not refused, as measured: one task (`--strategy=mirrored`, or any strategy in one process): the
script's MirroredStrategy is what it asked for, over this process's devices, and trains (tfdist's
fit guard, tfdist.keras_compat.strategy_guard, allows a model made under it). Horovod: its
strategy is TensorFlow's default and each process has its own devices (one GPU per process), so
the script's MirroredStrategy is one process's and Horovod's optimizer averages the gradients
over the processes (keras.io's guide script trained one model, every variable equal on both
ranks). A script's own MultiWorkerMirroredStrategy or ParameterServerStrategy (TensorFlow's
tutorials) spans the job and is not a MirroredStrategy.

TensorFlow imported inside the functions: `import tfdist` stays cheap.
"""

from __future__ import annotations

import functools
from typing import Optional

from tfdist.errors import TfdistError
from tfdist.keras_compat.strategy_guard import tasks_spanned

_refused: dict = {}  # "what": tfdist's strategy in words, while MirroredStrategy is refused
_MARK = "_tfdist_mirrored_guard"


class SecondStrategy(TfdistError, RuntimeError):
    """tf.distribute.MirroredStrategy() made after tfdist.init() built a strategy over several
    processes."""


def install(engine) -> None:
    """Refuse every MirroredStrategy made from now on where `engine`'s strategy spans several
    processes of TensorFlow's cluster; else refuse none (also what a later tfdist.init() starts
    from: `install(None)`)."""
    _refused.clear()
    processes = tasks_spanned(engine.strategy) if engine is not None else 0
    if processes < 2:
        return
    _refused["what"] = f"the {engine.name} strategy over {processes} processes"
    _wrap_mirrored_strategies()


def refusal() -> Optional[str]:
    """The error message a MirroredStrategy made now gets, or None where it is allowed."""
    what = _refused.get("what")
    if what is None:
        return None
    return (f"this script makes tf.distribute.MirroredStrategy() after tfdist.init() built {what}: "
            "a MirroredStrategy mirrors the devices of one process and cannot span the job's "
            "processes (made here, TensorFlow crashes with SIGSEGV or trains something other than "
            "one model over the job). Fix: use tfdist's strategy in its place, `strategy = "
            "tf.distribute.get_strategy()` after tfdist.init(), or `strategy = "
            "tfdist.init().strategy` as the init line; the script's `with strategy.scope():` and "
            "`strategy.num_replicas_in_sync` stay as they are.")


def _wrap_mirrored_strategies() -> None:
    """Wrap the constructors of tf.distribute.MirroredStrategy and its TF1 twin (once): each
    raises SecondStrategy while refusal() says so, before TensorFlow does anything."""
    from tensorflow.python.distribute import mirrored_strategy

    for cls in (mirrored_strategy.MirroredStrategy, mirrored_strategy.MirroredStrategyV1):
        tf_init = cls.__dict__["__init__"]
        if getattr(tf_init, _MARK, False):
            continue

        @functools.wraps(tf_init)
        def __init__(self, *args, tf_init=tf_init, **kwargs):
            message = refusal()
            if message is not None:
                raise SecondStrategy(message)
            tf_init(self, *args, **kwargs)

        setattr(__init__, _MARK, True)
        cls.__init__ = __init__
