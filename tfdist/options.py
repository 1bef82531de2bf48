"""Options given by name (engine options, rt.callbacks'): an unknown one is an error that names it,
what is taken instead, and the closest name when it looks like a typo. No TensorFlow here."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

from tfdist.errors import ConfigError


def check_options(given: Iterable[str], known: Sequence[str], of: str) -> None:
    """Raise a ConfigError when a name in `given` is not in `known`: `of` says whose options they
    are (e.g. "the horovod engine (tfdist.init(strategy='horovod'))")."""
    unknown = [name for name in given if name not in known]
    if not unknown:
        return
    named = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1)
        named.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    plural = "s" if len(unknown) > 1 else ""
    takes = ", ".join(known) if known else "no options"
    raise ConfigError(f"Unknown option{plural} {', '.join(named)} of {of}: it takes {takes}.")
