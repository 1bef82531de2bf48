"""tfdist's callbacks in every `model.fit` of the script, asked for or not.

A script with only `import tfdist` and `tfdist.init()` calls Keras's own `fit`. What keeps its
ranks one model and its run recoverable lives in tfdist's callbacks (tfdist.train.callbacks):
the engine's own (Horovod: the first weights broadcast, metrics averaged), layer statistics
averaged where each replica keeps its own (BatchNormalization's), the throughput meter, the
progress watchdog and, with a model directory ($MODEL_DIR or `tfdist.init(model_dir=...)`),
checkpoints, resume, the preemption stop and metrics.json. `install` makes every `fit` of a
training task get them (tfdist.keras_compat.user_fit), unless its callbacks already hold
tfdist's (`callbacks=rt.callbacks()`, `tfdist train`): added once, never twice.

`fit`'s `batch_size` is the global batch (tf.distribute's meaning); the checkpoint's identity and
metrics.json get the batch per replica from it. With a model directory, the first `fit` of the
process checkpoints into it and the n-th into `fit-<n>/` under it, so a requeued script resumes
each of its fits where that one stopped (a finished one restores its weights and trains no more).
"""

from __future__ import annotations

import logging
import os
from typing import Callable, Optional

from tfdist.keras_compat import adapter, user_fit

log = logging.getLogger("tfdist")

# make(model_dir or "", batch_size per replica or None) -> rt.callbacks' TrainingCallbacks.
# (tfdist.train.callbacks imported when a fit needs it: tfdist.init() imports no Keras.)
MakeCallbacks = Callable[[str, Optional[int]], list]
_state: dict = {}


def install(make: MakeCallbacks,
            model_dir: Optional[str],
            replicas: int,
            strategy: Optional[object] = None) -> None:
    """From now on every `fit` without tfdist's callbacks gets `make(...)`'s, with checkpoints in
    `model_dir` (None: none) for `replicas` replicas in sync; a model made under a strategy other
    than `strategy` (tfdist's engine's; None: TensorFlow's default) gets none."""
    _state.clear()
    _state.update(make=make,
                  model_dir=model_dir,
                  replicas=max(1, replicas),
                  fits=0,
                  strategy=strategy)
    user_fit.on("fit", __name__, _add)


def uninstall() -> None:
    _state.clear()
    user_fit.off("fit", __name__)


def has_tfdist_callbacks(callbacks) -> bool:
    """Whether `callbacks` (fit's argument: None, a callback, a list) holds tfdist's."""
    from tfdist.train.callbacks import TrainingCallbacks

    if callbacks is None:
        return False
    if isinstance(callbacks, TrainingCallbacks):
        return True
    if isinstance(callbacks, (list, tuple)):
        return any(has_tfdist_callbacks(c) for c in callbacks)
    return type(callbacks).__module__.startswith("tfdist.train.")


def _add(call: user_fit.Call) -> None:
    given = call.get("callbacks")
    if not _state or has_tfdist_callbacks(given):
        return
    made_under = adapter(call.model).strategy_at_build(call.model)
    if made_under is not None and made_under is not _state["strategy"]:
        # The script made its model under a strategy of its own (TensorFlow's tutorials do):
        # it trains as that strategy and the script's callbacks say; tfdist's are for its own.
        log.info("model.fit of a model made under the script's own %s: tfdist adds no callbacks",
                 type(made_under).__name__)
        return
    _state["fits"] += 1
    model_dir = _state["model_dir"]
    if model_dir and _state["fits"] > 1:
        model_dir = os.path.join(model_dir, f"fit-{_state['fits']}")
    batch_size = call.get("batch_size")
    per_replica = None
    if isinstance(batch_size, int) and batch_size % _state["replicas"] == 0:
        per_replica = batch_size // _state["replicas"]
    ours = _state["make"](model_dir or "", per_replica)
    # A script that keeps Horovod's own lines passes its broadcast and metric averaging: the
    # engine's of the same kind are left out, not run twice.
    present = {type(c).__name__ for c in user_fit.callbacks_in(given)}
    for callback in [c for c in ours if type(c).__name__ in present]:
        ours.remove(callback)
    if _state["fits"] == 1:
        log.info(
            "tfdist's callbacks added to model.fit (%s)",
            f"checkpoints in {model_dir}" if model_dir else "no model directory: no "
            "checkpoints; set $MODEL_DIR or tfdist.init(model_dir=...) to resume")
    if given is None:
        call.arguments["callbacks"] = ours
        return
    given = list(given) if isinstance(given, (list, tuple)) else [given]
    # The engine's (Horovod's metric averaging) before the script's, which then read the logs
    # every rank shares (an EarlyStopping on one rank's own loss could stop it alone), and so is
    # the layer statistics' averaging (the weights the script's callbacks keep are then every
    # rank's); tfdist's others after them (the preemption stop ends fit once the script's have
    # seen the epoch).
    front = [
        c for c in ours if not type(c).__module__.startswith("tfdist.train.")
        or getattr(c, "before_the_scripts", False)
    ]
    for callback in front:
        ours.remove(callback)
    # Keras 3 takes the list subclass as one callback; tf-keras flattens a nested list.
    rest = [ours] if adapter(call.model).GENERATION == 3 else list(ours)
    call.arguments["callbacks"] = front + given + rest
