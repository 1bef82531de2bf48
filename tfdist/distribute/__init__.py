"""One factory from a strategy name to an engine that answers the same questions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from tfdist.cluster import STRATEGIES, Cluster, Roles
from tfdist.errors import ConfigError
from tfdist.distribute.engine import Capabilities, Engine, LostTaskError
from tfdist.options import check_options


def engine_classes() -> dict[str, type[Engine]]:
    """Every engine by its name ("default" is what auto becomes in one task without GPUs)."""
    # Imported here so that `import tfdist.distribute` stays cheap (no TensorFlow); Horovod itself
    # is imported only when its engine is made.
    from tfdist.distribute import tf_strategies as tfs
    from tfdist.distribute.horovod_engine import HorovodEngine

    engines = (tfs.DefaultEngine, tfs.MirroredEngine, tfs.MultiWorkerEngine,
               tfs.ParameterServerEngine, tfs.CentralStorageEngine, tfs.OneDeviceEngine,
               HorovodEngine)
    return {engine.name: engine for engine in engines}


def option_names(strategy: str) -> tuple[str, ...]:
    """The engine options tfdist.init(strategy=...) takes; auto takes those of every engine, as it
    may become any (a launcher's choice, the task count, the GPUs decide)."""
    engines = engine_classes()
    if strategy == "auto":
        return tuple(dict.fromkeys(n for engine in engines.values() for n in engine.option_names()))
    return engines[strategy].option_names()


def make_engine(cluster: Cluster,
                roles: Roles,
                options: Optional[Mapping[str, Any]] = None,
                asked: Optional[str] = None) -> Engine:
    """The engine for `roles.strategy` (already checked and resolved by the cluster layer) with
    `options`, which must be options of `asked`, the strategy as tfdist.init was given it
    (default: roles.strategy). Under auto the engine it became takes those that are its own."""
    options = dict(options or {})
    name = roles.strategy
    if name not in STRATEGIES:
        raise ConfigError(f"Unknown strategy {name!r}: expected one of {', '.join(STRATEGIES)}.")
    asked = asked or name
    check_options(options, option_names(asked),
                  f"the {asked} engine (tfdist.init(strategy={asked!r}))")
    if name == "auto":
        from tfdist.distribute.tf_strategies import single_task_engine

        engine = single_task_engine()
    else:
        engine = engine_classes()[name]
    own = engine.option_names()
    return engine(cluster, roles, **{k: v for k, v in options.items() if k in own})


__all__ = ["Capabilities", "Engine", "LostTaskError", "make_engine", "option_names"]
