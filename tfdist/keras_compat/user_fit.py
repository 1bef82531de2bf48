"""tfdist's place in the script's own `model.compile`, `model.fit`, `model.save` and
`model.save_weights`, both Kerases.

A script with only `import tfdist` and `tfdist.init()` calls Keras's own `compile` and `fit`; what
it needs to train as one model over every task (refusing a model made outside the strategy,
Horovod's optimizer and broadcast, callbacks that write once, state kept equal on every rank)
happens here, as hooks that `tfdist.init()` registers for its engine. Each hook sees the model
and the call's arguments by name (`Call.arguments`: what the caller passed, positional ones
named, defaults not filled in) and may change them, e.g. add a callback or wrap the optimizer,
or add a context manager for Keras's method to run inside (`Call.around`).
A hook must be idempotent on a call it already changed: `tfdist train`, `rt.callbacks()` and a
script's own Horovod lines pass what a hook would add.

Keras 3's `TensorFlowTrainer` (compile, fit) and `Model` (save, save_weights) and tf-keras's
`Model` (all four) are wrapped once, when imported; with no hook registered these methods run as
Keras wrote them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import sys
from typing import Any, Callable

from tfdist import import_hooks
from tfdist.keras_compat.modules import MODEL, TF_KERAS_TRAINING, TRAINER

_MARK = "_tfdist_user_fit"


@dataclasses.dataclass
class Call:
    """One call of `compile`, `fit`, `save` or `save_weights`: the model, the arguments by
    name, and the context managers Keras's method runs inside (entered in order)."""
    model: Any
    arguments: dict
    around: list = dataclasses.field(default_factory=list)

    def get(self, name: str, default=None):
        return self.arguments.get(name, default)


Hook = Callable[[Call], None]
_HOOKS: dict[str, list[tuple[str, Hook]]] = {
    "compile": [],
    "fit": [],
    "save": [],
    "save_weights": []
}
# Where each Keras defines them: Keras 3's Model defines save, its backend's trainer fit.
_METHODS = (
    (TRAINER, "TensorFlowTrainer", ("compile", "fit")),
    (MODEL, "Model", ("save", "save_weights")),
    (TF_KERAS_TRAINING, "Model", ("compile", "fit", "save", "save_weights")),
)


def on(method: str, name: str, hook: Hook) -> None:
    """Call `hook(call)` before every `compile`, `fit`, `save` or `save_weights` (`method`), in
    registration order;
    registering `name` again replaces its hook in place."""
    hooks = _HOOKS[method]
    for i, (known, _) in enumerate(hooks):
        if known == name:
            hooks[i] = (name, hook)
            break
    else:
        hooks.append((name, hook))
    _install()


def off(method: str, name: str) -> None:
    """Remove the hook registered as `name` (nothing if none)."""
    _HOOKS[method][:] = [(n, h) for n, h in _HOOKS[method] if n != name]


def callbacks_in(callbacks):
    """Each callback of fit's `callbacks` argument (None, one callback, lists nested in lists:
    rt.callbacks()' list among the script's), in order."""
    if isinstance(callbacks, (list, tuple)):
        for c in callbacks:
            yield from callbacks_in(c)
    elif callbacks is not None:
        yield callbacks


def _install() -> None:
    for module, cls_name, methods in _METHODS:
        import_hooks.when_imported(module,
                                   after=functools.partial(_wrap,
                                                           cls_name=cls_name,
                                                           methods=methods))
        if module in sys.modules:
            _wrap(sys.modules[module], cls_name, methods)


def _wrap(module, cls_name: str, methods: tuple) -> None:
    cls = getattr(module, cls_name)
    for method in methods:
        keras_method = getattr(cls, method)
        if getattr(keras_method, _MARK, False):
            continue
        wrapped = _hooked(method, keras_method)
        setattr(wrapped, _MARK, True)
        setattr(cls, method, wrapped)


def _hooked(method: str, keras_method):
    signature = inspect.signature(keras_method)

    @functools.wraps(keras_method)
    def call_with_hooks(self, *args, **kwargs):
        if not _HOOKS[method]:
            return keras_method(self, *args, **kwargs)
        bound = signature.bind(self, *args, **kwargs)
        arguments = dict(bound.arguments)
        del arguments[next(iter(signature.parameters))]  # self
        extra = arguments.pop(_var_keyword(signature), {})
        arguments.update(extra)
        call = Call(self, arguments)
        for _, hook in list(_HOOKS[method]):
            hook(call)
        with contextlib.ExitStack() as contexts:
            for context in call.around:
                contexts.enter_context(context)
            return keras_method(self, **call.arguments)

    return call_with_hooks


def _var_keyword(signature: inspect.Signature) -> str:
    """The name of `**kwargs` in `signature` ("" where it has none)."""
    return next((p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), "")
