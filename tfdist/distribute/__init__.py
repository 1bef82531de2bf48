"""One factory from a strategy name to an engine that answers the same questions."""

from __future__ import annotations

from typing import Any

from tfdist.cluster import STRATEGIES, Cluster, Roles
from tfdist.errors import ConfigError
from tfdist.distribute.engine import Capabilities, Engine, LostTaskError


def make_engine(cluster: Cluster, roles: Roles, **options: Any) -> Engine:
    """The engine for `roles.strategy` (already checked and resolved by the cluster layer)."""
    # Imported here so that `import tfdist.distribute` stays cheap and Horovod stays optional.
    from tfdist.distribute import tf_strategies as tfs

    name = roles.strategy
    if name == "auto":
        return tfs.single_task_engine(cluster, roles, **options)
    if name == "horovod":
        from tfdist.distribute.horovod_engine import HorovodEngine

        return HorovodEngine(cluster, roles, **options)
    engines = {
        "mirrored": tfs.MirroredEngine,
        "multi_worker": tfs.MultiWorkerEngine,
        "parameter_server": tfs.ParameterServerEngine,
        "central_storage": tfs.CentralStorageEngine,
        "one_device": tfs.OneDeviceEngine,
    }
    if name not in engines:
        raise ConfigError(f"Unknown strategy {name!r}: expected one of {', '.join(STRATEGIES)}.")
    return engines[name](cluster, roles, **options)


__all__ = ["Capabilities", "Engine", "LostTaskError", "make_engine"]
