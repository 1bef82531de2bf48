"""XLA (Keras's `jit_compile`) under tfdist's engine: a stop where the step cannot compile, and a
word where Keras 3 turned it off.

`model.compile(jit_compile=True)` under a strategy that XLA cannot compile fails at the first step
with an error from deep in TensorFlow's graph compiler, each engine its own (measured with
TensorFlow 2.18, tf-keras and Keras 3.8, under every engine: docs/benchmarks.md#xla). The
engine says why it cannot (tfdist.distribute's `Engine.xla_refusal`); after `expect`, `fit`
stops there, before training, with the reason and the fix.

Keras 3's default, `jit_compile="auto"`, is off on a machine without a GPU and off under any
tf.distribute strategy (its trainer's `_resolve_auto_jit_compile`): a model that compiles with
XLA on one GPU loses it under the strategy. tfdist keeps that choice (it has measured no GPU)
and says it once, at `compile`, where Keras 3 would have compiled with XLA on one device."""

from __future__ import annotations

import logging
from typing import Optional

from tfdist.errors import TfdistError
from tfdist.keras_compat import is_keras3, user_fit

log = logging.getLogger("tfdist")

_expected: dict = {}  # "refusal": the engine's reason; "what": its words for the message
_said: set = set()  # the models whose "auto" was reported, by id


class XlaUnderStrategy(TfdistError, RuntimeError):
    """model.fit of a model compiled with XLA where tfdist's engine cannot run such a step."""


def expect(what: str, refusal: Optional[str], several: bool, gpus: bool) -> None:
    """From now on, `fit` refuses a model compiled with `jit_compile=True` when `refusal` (the
    engine's reason) is given, and `compile` reports a Keras 3 "auto" that the strategy turned off
    when the engine trains `several` replicas or tasks on `gpus` (`what`: the engine in words)."""
    _expected.clear()
    _expected.update(what=what, refusal=refusal)
    if refusal:
        user_fit.on("fit", __name__, _check_fit)
    else:
        user_fit.off("fit", __name__)
    if several and gpus:
        user_fit.on("compile", __name__, _report_auto)
    else:
        user_fit.off("compile", __name__)


def refused(name: str, what: str, refusal: str) -> str:
    return (f"{name} is compiled with jit_compile=True (XLA), which cannot train under "
            f"{what}: {refusal}. Fix: compile without it (`model.compile(..., "
            "jit_compile=False)`; Keras 3's default, \"auto\", is off under any distribution "
            "strategy), or train on one device.")


def auto_off(name: str, what: str, refusal: Optional[str]) -> str:
    why = (f"XLA cannot train under {what}: {refusal}"
           if refusal else f"XLA under {what} is not measured by tfdist (docs/benchmarks.md#xla); "
           "`model.compile(..., jit_compile=True)` asks for it")
    return (f"Keras 3 compiles {name} without XLA: its jit_compile=\"auto\" is off under any "
            f"tf.distribute strategy (on one GPU it would be on). tfdist keeps that choice: {why}.")


def _check_fit(call: user_fit.Call) -> None:
    refusal = _expected.get("refusal")
    if refusal and getattr(call.model, "jit_compile", False) is True:
        raise XlaUnderStrategy(refused(type(call.model).__name__, _expected["what"], refusal))


def _report_auto(call: user_fit.Call) -> None:
    model = call.model
    if (not is_keras3(model) or call.get("jit_compile", "auto") != "auto" or call.get("run_eagerly")
            or id(model) in _said):
        return
    from tfdist.keras_compat import adapter

    if adapter(model).strategy_at_build(model) is None:
        return  # a plain copy of tfdist's own, outside the strategy: Keras decides as usual
    _said.add(id(model))
    log.info(auto_off(type(model).__name__, _expected["what"], _expected["refusal"]))
