"""Run tfdist's code when another library's module executes, whatever the order of imports.

tfdist corrects how a few modules of other libraries behave (Horovod's Keras API bound to
tf-keras; Keras 3's TensorFlow trainer under multi-worker mode: tfdist.keras_compat).
`when_imported(name, around=..., after=...)` registers what to do; one finder on
`sys.meta_path` wraps the named modules' own loaders, so the module is executed inside `around()`
(a context manager) and handed to `after(module)` once executed. A module imported before tfdist
is the caller's business (re-execute it, or correct it in place at once).

No TensorFlow, Keras or Horovod here: `import tfdist` stays cheap.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import sys
from typing import Callable, ContextManager, Optional

Around = Callable[[], ContextManager]
After = Callable[[object], None]

_HOOKS: dict[str, list[tuple[Optional[Around], Optional[After]]]] = {}


def when_imported(name: str,
                  after: Optional[After] = None,
                  around: Optional[Around] = None) -> None:
    """From now on, execute module `name` inside `around()` and then call `after(module)`
    (idempotent: the same pair registered twice runs once)."""
    hooks = _HOOKS.setdefault(name, [])
    if (around, after) not in hooks:
        hooks.append((around, after))
    if not any(isinstance(finder, _HookFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _HookFinder())


class _HookLoader(importlib.abc.Loader):
    """Wraps a module's own loader: executes it inside the hooks' contexts, then their `after`."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        hooks = list(_HOOKS.get(module.__name__, ()))
        with contextlib.ExitStack() as stack:
            for around, _ in hooks:
                if around is not None:
                    stack.enter_context(around())
            self._loader.exec_module(module)
        for _, after in hooks:
            if after is not None:
                after(module)


class _HookFinder(importlib.abc.MetaPathFinder):
    """Finds the hooked modules with the other finders and wraps their loader."""

    def find_spec(self, name, path, target=None):
        if name not in _HOOKS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and not isinstance(spec.loader, _HookLoader):
                    spec.loader = _HookLoader(spec.loader)
                return spec
        return None
