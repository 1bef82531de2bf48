"""Running one `tfdist` sub-command as an absl program with a useful --help."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Callable

from absl import app, flags


def run_command(main: Callable[[list[str]], None], argv: list[str], *modules: ModuleType) -> None:
    """app.run(main) with the docstring of modules[0] as usage and the flags that `modules`
    define listed by --help (absl lists only the key flags of the script named by sys.argv[0])."""
    sys.modules["__main__"].__doc__ = modules[0].__doc__
    for module in modules:
        for flag in flags.FLAGS.get_key_flags_for_module(module.__name__):
            flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    app.run(main, argv=argv)
