"""The strategy a launcher runs its processes under, read the same way in every environment.

`tfdist launch --strategy=S` and the `jobs/` batch scripts export their choice (TFDIST_STRATEGY,
with parameter_server's TFDIST_NUM_PS and TFDIST_EVALUATOR, and TFDIST_STRATEGY_BY naming who
chose) to the processes they start, under `tfdist launch`, `srun`, `mpirun`, ... alike.
`tfdist.init()` asked for "auto" takes it; a script that asks for another gets an error naming
both (tfdist.cluster.roles): never a silent choice of either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from tfdist import env_vars
from tfdist.cluster.errors import ClusterError
from tfdist.cluster.strategy_names import STRATEGIES

STRATEGY = env_vars.STRATEGY.name
NUM_PS = env_vars.NUM_PS.name
EVALUATOR = env_vars.EVALUATOR.name
BY = env_vars.STRATEGY_BY.name
LAUNCH = "tfdist launch"  # TFDIST_STRATEGY_BY of `tfdist launch`


def choice_environ(strategy: Optional[str],
                   by: str,
                   num_ps: Optional[int] = None,
                   evaluator: Optional[bool] = None) -> dict[str, str]:
    """The variables a launcher gives its processes for its choice (nothing for "auto")."""
    if not strategy or strategy == "auto":
        return {}
    env = {STRATEGY: strategy, BY: by}
    if num_ps is not None:
        env[NUM_PS] = str(num_ps)
    if evaluator is not None:
        env[EVALUATOR] = "1" if evaluator else "0"
    return env


def read_choice(environ: Mapping[str, str]) -> dict[str, Any]:
    """The launcher's choice as Cluster fields (strategy, strategy_by, num_ps, evaluator); empty
    when no launcher chose."""
    strategy = environ.get(STRATEGY, "")
    if strategy in ("", "auto"):
        return {}
    by = environ.get(BY) or f"{STRATEGY}={strategy}"
    if strategy not in STRATEGIES:
        raise ClusterError(f"{STRATEGY}={strategy!r} (set by {by}) is not a strategy: expected one "
                           f"of {', '.join(STRATEGIES)}.")
    choice: dict[str, Any] = {"strategy": strategy, "strategy_by": by}
    raw = environ.get(NUM_PS, "")
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise ClusterError(f"{NUM_PS}={raw!r} (set by {by}) is not a number of parameter "
                               "servers: expected 1 or more.")
        choice["num_ps"] = int(raw)
    raw = environ.get(EVALUATOR, "")
    if raw:
        if raw not in ("0", "1"):
            raise ClusterError(f"{EVALUATOR}={raw!r} (set by {by}): expected 1 or 0.")
        choice["evaluator"] = raw == "1"
    return choice


CHOICE_VARS = (STRATEGY, NUM_PS, EVALUATOR, BY)

# How to ask each launcher for another value, for the fix in the message.
_JOB_SETTING = {"num_ps": "NUM_PS", "evaluator": "EVALUATOR"}


def _ask_launcher(by: str, name: str, value: Any) -> str:
    if by == LAUNCH:
        if name == "evaluator":
            return f"`tfdist launch --{'' if value else 'no'}evaluator`"
        return f"`tfdist launch --{name}={value}`"
    if by.startswith("jobs/"):
        if name == "strategy":
            return f"submit `jobs/{value}.sbatch` instead"
        value = int(value) if name == "evaluator" else value
        return f"`{_JOB_SETTING[name]}={value} sbatch {by} ...`"
    variable = {"strategy": STRATEGY, "num_ps": NUM_PS, "evaluator": EVALUATOR}[name]
    return f"set {variable}={int(value) if name == 'evaluator' else value} there"


def _described(name: str, value: Any) -> str:
    if name == "evaluator":
        return "an evaluator task" if value else "no evaluator task"
    return f"--{name}={value}"


def conflict(by: str, name: str, chosen: Any, asked: Any) -> ClusterError:
    """The error for a process that asks for another `name` (strategy, num_ps, evaluator) than
    its launcher `by` chose: both named, and the two ways out."""
    return ClusterError(
        f"{by} runs this job with {_described(name, chosen)}, but this process asks for "
        f"{_described(name, asked)} (tfdist.init({name}={asked!r}) in the script, or the "
        f"command's --{name} flag): tfdist will not choose between them. Fix: leave {name} out "
        f"of the script, and tfdist.init() takes {_described(name, chosen)} from {by}; or run "
        f"the script with {_described(name, asked)}: {_ask_launcher(by, name, asked)}.")
