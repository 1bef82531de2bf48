"""Which training steps and ranks TensorFlow's profiler traces: `--profile_steps=A:B` and
`--profile_ranks=`, `rt.callbacks(profile_steps=(A, B), profile_ranks=[...])`, and for a script
that has only tfdist's two lines $PROFILE_STEPS and $PROFILE_RANKS (the `jobs/` scripts pass the
submitting shell's environment on). Parsed and checked here, without TensorFlow, so that a flag's
bad value stops the command before anything loads.

Steps count from 1 over the whole run, as the checkpoints count them (step 1 is the first of
epoch 1, step `steps_per_epoch + 1` the first of epoch 2). Step 1 is refused: its call traces
and compiles the step function, so its trace shows that work, not a training step's
(tensorflow#33571).
"""

from __future__ import annotations

import os
from typing import Any, Optional

from tfdist import env_vars
from tfdist.errors import ConfigError

STEPS_FORM = "A:B, the first and last training step to trace (from 2, A <= B), e.g. 20:25"
RANKS_FORM = "'all' or ranks separated by commas, e.g. 0,3"


def parse_steps(value: Any, source: str = "profile_steps") -> Optional[tuple[int, int]]:
    """(A, B) from "A:B" or a pair, None for None, "" or "0"/"off"; a bad value is a ConfigError
    naming `source` (e.g. "--profile_steps", "$PROFILE_STEPS"), the value and the form
    expected."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "0", "off")):
        return None
    if isinstance(value, str):
        parts = value.strip().split(":")
    elif isinstance(value, (tuple, list)):
        parts = list(value)
    else:
        parts = []
    try:
        first, last = (int(p) for p in parts)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}={value!r}: expected {STEPS_FORM}.") from None
    if first < 1 or last < first:
        raise ConfigError(f"{source}={value!r}: expected {STEPS_FORM}; "
                          f"{'A must be at least 1' if first < 1 else 'B is before A'}.")
    if first == 1:
        raise ConfigError(
            f"{source}={value!r}: step 1 builds and compiles the step function, so its trace shows "
            "that, not a training step (tensorflow#33571). Expected "
            f"{STEPS_FORM}; e.g. 2:{max(2, last)}.")
    return first, last


def parse_ranks(value: Any, source: str = "profile_ranks") -> Optional[frozenset[int]]:
    """The ranks to trace: None (every rank) for None, "" or "all"; else a set of ranks from
    "0,3" or a sequence of ints."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "all")):
        return None
    parts = value.split(",") if isinstance(value, str) else value
    try:
        ranks = frozenset(int(p) for p in parts)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}={value!r}: expected {RANKS_FORM}.") from None
    if not ranks or min(ranks) < 0:
        raise ConfigError(f"{source}={value!r}: expected {RANKS_FORM} (ranks from 0).")
    return ranks


def steps_setting(value: Any = None, environ=None) -> Optional[tuple[int, int]]:
    """`value` (rt.callbacks', --profile_steps'), else $PROFILE_STEPS, parsed (parse_steps)."""
    if value is not None:
        return parse_steps(value)
    environ = os.environ if environ is None else environ
    return parse_steps(environ.get(env_vars.PROFILE_STEPS.name), f"${env_vars.PROFILE_STEPS.name}")


def ranks_setting(value: Any = None, environ=None) -> Optional[frozenset[int]]:
    """`value`, else $PROFILE_RANKS, parsed (parse_ranks)."""
    if value is not None:
        return parse_ranks(value)
    environ = os.environ if environ is None else environ
    return parse_ranks(environ.get(env_vars.PROFILE_RANKS.name), f"${env_vars.PROFILE_RANKS.name}")
