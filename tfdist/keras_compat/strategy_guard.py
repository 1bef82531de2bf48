"""The stop for a model that would train as one independent copy per worker.

A Keras model keeps the distribution strategy in scope when it was made (tf-keras's
`_distribution_strategy`, Keras 3's `_distribute_strategy`: None outside any strategy), and its
`fit` trains under that one. `tfdist.init()` makes the engine's strategy the program's default
(tfdist.distribute.default_strategy), so a model made after it is under it. One made before
`tfdist.init()` (or in another thread outside `rt.scope()`) trains alone on each worker: N
processes, N different models, and nothing says so; so does one made under a strategy of the
script's own that is per task where there are several (a MirroredStrategy of each task's GPUs),
while one over them (TensorFlow's tutorials' MultiWorkerMirrored or ParameterServer strategy, on the
TF_CONFIG tfdist exported) trains one model. After `expect` (tfdist.init, for engines whose strategy
holds the model: several replicas or tasks), both Kerases refuse such a model with the fix: its
`fit` always, its `compile` where it runs under the engine's strategy (tf-keras would stop there
with its own "not created in the distribution strategy scope"; Keras 3 would compile a model half
under it). Elsewhere Keras's own `fit` and `compile` run unchanged, e.g. tfdist's own plain copies,
compiled outside the strategy (tfdist.distribute.default_strategy.outside)."""

from __future__ import annotations

import functools
import sys

from tfdist import import_hooks
from tfdist.errors import TfdistError
from tfdist.keras_compat.modules import TF_KERAS_TRAINING, TRAINER

_MARK = "_tfdist_strategy_guard"
_expected: dict = {}  # "strategy": the engine's; "what": its words for the error


class ModelOutsideStrategy(TfdistError, RuntimeError):
    """model.fit of a model made outside the strategy tfdist trains with."""


def expect(strategy, what: str, tasks: int = 1) -> None:
    """From now on, `fit` refuses a model not made under `strategy` (`what`: e.g. "multi_worker,
    2 workers"; `tasks`: how many tasks train it); None: refuse nothing."""
    _expected.clear()
    if strategy is not None:
        _expected.update(strategy=strategy, what=what, tasks=tasks)
    for name, cls_name in ((TRAINER, "TensorFlowTrainer"), (TF_KERAS_TRAINING, "Model")):
        import_hooks.when_imported(name, after=functools.partial(_guard, cls_name=cls_name))
        if name in sys.modules:
            _guard(sys.modules[name], cls_name)


def check(model) -> None:
    """Raise ModelOutsideStrategy when `model` was not made under the expected strategy nor
    under one of the script's own that trains one model over every task."""
    strategy = _expected.get("strategy")
    if strategy is None:
        return
    from tfdist.keras_compat import adapter

    made_under = adapter(model).strategy_at_build(model)
    # A strategy of the script's own trains one model where it spans every task: one task, or
    # several in its cluster (TensorFlow's tutorials); a per-task one would train a copy each.
    if made_under is strategy or (made_under is not None and
                                  (_expected["tasks"] == 1 or _over_several_tasks(made_under))):
        return
    where = ("outside any distribution strategy"
             if made_under is None else f"under another strategy ({type(made_under).__name__})")
    raise ModelOutsideStrategy(
        f"{type(model).__name__} was made {where}, not in tfdist's ({_expected['what']}): "
        "its fit would train an independent copy in every task, on one device. Fix: make and "
        "compile the model after `rt = tfdist.init()`, which makes its strategy the default (in "
        "the thread that called it; elsewhere inside `with rt.scope():`).")


def _over_several_tasks(strategy) -> bool:
    """Whether `strategy` is a strategy of the script's own over several tasks (e.g. the
    ParameterServerStrategy of TensorFlow's tutorial, over the TF_CONFIG tfdist exported): it
    trains one model over them, as tfdist's would."""
    # ParameterServerStrategy keeps its resolver on itself, where the public property (which
    # reads the strategy's `extended`) does not look (TensorFlow 2.16 to 2.21).
    resolver = (getattr(strategy, "cluster_resolver", None)
                or getattr(strategy, "_cluster_resolver", None))
    if resolver is None:
        return False
    jobs = resolver.cluster_spec().as_dict()
    return sum(len(tasks) for job, tasks in jobs.items() if job != "evaluator") > 1


def _guard(module, cls_name: str) -> None:
    cls = getattr(module, cls_name)
    if getattr(cls.fit, _MARK, False):
        return
    keras_fit, keras_compile = cls.fit, cls.compile

    @functools.wraps(keras_fit)
    def fit(self, *args, **kwargs):
        check(self)
        return keras_fit(self, *args, **kwargs)

    @functools.wraps(keras_compile)
    def compile(self, *args, **kwargs):
        if _expected.get("strategy") is not None:
            import tensorflow as tf

            if tf.distribute.get_strategy() is _expected["strategy"]:
                check(self)
        return keras_compile(self, *args, **kwargs)

    setattr(fit, _MARK, True)
    cls.fit, cls.compile = fit, compile
