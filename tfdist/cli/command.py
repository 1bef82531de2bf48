"""Running one `tfdist` sub-command as an absl program: a useful --help, one way to fail, and
--verbosity=1 showing everything.

A TfdistError is a failure tfdist explains in words: its message is printed as
`tfdist COMMAND: error: ...` and the command exits with status 2. Any other exception (a bug, or
TensorFlow's own error) keeps its traceback. A lost peer task exits with status 1 at once: the
threads of a broken collective can hang the interpreter's teardown.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from types import ModuleType
from typing import Callable

from absl import app, flags

from tfdist import logs
from tfdist.errors import TfdistError

USAGE_ERROR = 2  # a set-up that cannot work, like a wrong argument


def run_command(main: Callable[[list[str]], None], argv: list[str], *modules: ModuleType) -> None:
    """app.run(main) with the docstring of modules[0] as usage and the flags that `modules`
    define listed by --help (absl lists only the key flags of the script named by sys.argv[0])."""
    sys.modules["__main__"].__doc__ = modules[0].__doc__
    for module in modules:
        for flag in flags.FLAGS.get_key_flags_for_module(module.__name__):
            flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    app.run(functools.partial(_explained, main), argv=argv)


def _explained(main: Callable[[list[str]], None], argv: list[str]) -> None:
    verbose = flags.FLAGS["verbosity"].value >= 1 or logs.verbose()
    logs.set_verbose(verbose)
    if not verbose:  # absl's INFO, where TensorFlow logs e.g. each checkpoint's sharding
        logging.getLogger("absl").setLevel(logging.WARNING)
    try:
        main(argv)
    except TfdistError as e:
        from tfdist.distribute.engine import LostTaskError

        print(f"{argv[0]}: error: {e}", file=sys.stderr, flush=True)
        if isinstance(e, LostTaskError):
            os._exit(1)
        sys.exit(USAGE_ERROR)
