"""The stop for a model that would train as one independent copy per worker.

A Keras model keeps the distribution strategy in scope when it was made (tf-keras's
`_distribution_strategy`, Keras 3's `_distribute_strategy`: None outside any strategy), and its
`fit` trains under that one. A model made before `tfdist.init()`, or outside the engine's strategy,
trains alone on each worker: N processes, N different models, and nothing says so. After `expect`
(tfdist.init, for engines whose strategy holds the model: several replicas or tasks), `fit` of
both Kerases refuses such a model with the fix; elsewhere Keras's own `fit` runs unchanged.
"""

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


def expect(strategy, what: str) -> None:
    """From now on, `fit` refuses a model not made under `strategy` (`what`: e.g. "multi_worker,
    2 workers"); None: refuse nothing."""
    _expected.clear()
    if strategy is not None:
        _expected.update(strategy=strategy, what=what)
    for name, cls_name in ((TRAINER, "TensorFlowTrainer"), (TF_KERAS_TRAINING, "Model")):
        import_hooks.when_imported(name, after=functools.partial(_guard, cls_name=cls_name))
        if name in sys.modules:
            _guard(sys.modules[name], cls_name)


def check(model) -> None:
    """Raise ModelOutsideStrategy when `model` was made outside any strategy while tfdist's
    holds several replicas or tasks."""
    if _expected.get("strategy") is None:
        return
    from tfdist.keras_compat import adapter

    # A model made under a strategy of the script's own (TensorFlow's parameter-server tutorial
    # makes one) trains as that strategy says: the script chose it. Refused: none at all.
    if adapter(model).strategy_at_build(model) is not None:
        return
    raise ModelOutsideStrategy(
        f"{type(model).__name__} was made outside any distribution strategy, not in tfdist's "
        f"({_expected['what']}): its fit would train an independent copy in every task, on one "
        "device. Fix: make and compile the model after `rt = tfdist.init()`, inside `with "
        "rt.scope():`.")


def _guard(module, cls_name: str) -> None:
    cls = getattr(module, cls_name)
    if getattr(cls.fit, _MARK, False):
        return
    keras_fit = cls.fit

    @functools.wraps(keras_fit)
    def fit(self, *args, **kwargs):
        check(self)
        return keras_fit(self, *args, **kwargs)

    setattr(fit, _MARK, True)
    cls.fit = fit
