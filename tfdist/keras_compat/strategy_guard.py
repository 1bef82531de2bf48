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

from tfdist.errors import TfdistError
from tfdist.keras_compat import user_fit

_expected: dict = {}  # "strategy": the engine's; "what": its words for the error


class ModelOutsideStrategy(TfdistError, RuntimeError):
    """model.fit of a model made outside the strategy tfdist trains with."""


def expect(strategy, what: str, tasks: int = 1) -> None:
    """From now on, `fit` refuses a model not made under `strategy` (`what`: e.g. "multi_worker,
    2 workers"; `tasks`: how many tasks train it); None: refuse nothing."""
    _expected.clear()
    if strategy is None:
        user_fit.off("fit", __name__)
        user_fit.off("compile", __name__)
        return
    _expected.update(strategy=strategy, what=what, tasks=tasks)
    user_fit.on("fit", __name__, _check_fit)
    user_fit.on("compile", __name__, _check_compile)


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


def tasks_spanned(strategy) -> int:
    """The tasks (processes) of TensorFlow's cluster that `strategy` spans, the evaluator not
    counted; 0 for a strategy of one process (TensorFlow's default, Mirrored, OneDevice)."""
    if strategy is None:
        return 0
    # ParameterServerStrategy keeps its resolver on itself, where the public property (which
    # reads the strategy's `extended`) does not look (TensorFlow 2.16 to 2.21).
    resolver = (getattr(strategy, "cluster_resolver", None)
                or getattr(strategy, "_cluster_resolver", None))
    if resolver is None:
        return 0
    jobs = resolver.cluster_spec().as_dict()
    return sum(len(tasks) for job, tasks in jobs.items() if job != "evaluator")


def _over_several_tasks(strategy) -> bool:
    """Whether `strategy` is a strategy of the script's own over several tasks (e.g. the
    ParameterServerStrategy of TensorFlow's tutorial, over the TF_CONFIG tfdist exported): it
    trains one model over them, as tfdist's would."""
    return tasks_spanned(strategy) > 1


def _check_fit(call: user_fit.Call) -> None:
    check(call.model)


def _check_compile(call: user_fit.Call) -> None:
    import tensorflow as tf

    if tf.distribute.get_strategy() is _expected.get("strategy"):
        check(call.model)
