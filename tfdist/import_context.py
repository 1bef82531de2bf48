"""Whether tfdist/__init__.py runs only as the parent package of a TensorFlow-free entry point.

`import tfdist` sets the process up for training (tfdist/__init__.py: an import hook that corrects
Keras and Horovod, TensorFlow's log level in the environment, tfdist's log handler). Python also
runs tfdist/__init__.py when a program imports only a submodule, so `import tfdist.cluster` (the
standard-library-only cluster layer) and `python -m tfdist.cli.launch_guard` (started before
every rank of `tfdist launch`, whose children inherit its environment) would get the same set-up.
They do not need it and must not have it.

Python has no public way to tell `import tfdist` from `import tfdist.cluster` while the package
executes. An environment flag would be inherited by the processes such a program starts, and
these entry points are meant to be imported without ceremony, so the import itself is read:
- `python -m MODULE`: while runpy imports MODULE's packages, sys.argv[0] is "-m" (documented) and
  sys.orig_argv names MODULE;
- an import statement or importlib.import_module: CPython's import machinery runs one
  `_find_and_load(name)` frame per module, the one asked for outermost (importlib._bootstrap,
  unchanged since Python 3.3).
Anything else reads as `import tfdist`, so the set-up runs as it always did: a Python whose import
machinery changed would cost these entry points their lightness, never a user's script its
set-up (tests/test_import_side_effects.py checks both ways). One order escapes it: a program that
imports the cluster layer before `import tfdist` (which then finds the package imported) is set
up by tfdist.init().
"""

from __future__ import annotations

import sys
from typing import Optional

# The TensorFlow-free entry points, with their submodules.
TENSORFLOW_FREE = ("tfdist.cluster", "tfdist.cli.launch_guard")
_IMPORT_MACHINERY = "<frozen importlib._bootstrap"  # also matches _bootstrap_external


def tensorflow_free_import(depth: int = 1) -> bool:
    """Whether the module being imported (by the frame `depth` levels up, tfdist/__init__.py) is
    only the parent of one of TENSORFLOW_FREE."""
    asked = _module_asked_for(depth + 1)
    return asked is not None and any(asked == name or asked.startswith(name + ".")
                                     for name in TENSORFLOW_FREE)


def _module_asked_for(depth: int) -> Optional[str]:
    """The module whose import runs the frame `depth` levels up; None when it cannot be told."""
    if sys.argv[:1] == ["-m"]:
        return _main_module(getattr(sys, "orig_argv", []))
    try:
        frame = sys._getframe(depth + 1)  # the importer of that frame's module
    except (AttributeError, ValueError):
        return None
    asked = None
    while frame is not None and frame.f_code.co_filename.startswith(_IMPORT_MACHINERY):
        if frame.f_code.co_name == "_find_and_load":
            asked = frame.f_locals.get("name", asked)
        frame = frame.f_back
    return asked if isinstance(asked, str) else None


def _main_module(argv: list[str]) -> Optional[str]:
    """MODULE of `python [options] -m MODULE ...`."""
    for i, arg in enumerate(argv[1:], 1):
        if arg == "-m":
            return argv[i + 1] if i + 1 < len(argv) else None
        if arg.startswith("-m"):
            return arg[2:]
    return None
