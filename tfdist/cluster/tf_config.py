"""A TF_CONFIG the user set: validated, then passed through unchanged."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tfdist.cluster.base import Cluster, ClusterEnv
from tfdist.cluster.errors import ClusterError

TF_CONFIG = "TF_CONFIG"
# Rank order of the task types: the chief first, as TensorFlow treats it.
_TYPE_ORDER = ("chief", "worker", "ps", "evaluator")
_EXPECTED = ('Expected e.g. {"cluster": {"worker": ["host1:2222", "host2:2222"]}, '
             '"task": {"type": "worker", "index": 0}}; or unset TF_CONFIG and let tfdist build it.')


class TFConfigEnv(ClusterEnv):
    name = "tf_config"

    @classmethod
    def is_present(cls, environ: Mapping[str, str]) -> bool:
        return bool(environ.get(TF_CONFIG, "").strip())

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> Cluster:
        config = parse_tf_config(environ[TF_CONFIG])
        task = config["task"]
        tasks = ordered_tasks(config)
        rank = next(r for r, (t, i, _) in enumerate(tasks)
                    if (t, i) == (task["type"], task["index"]))
        hosts = tuple(addr.rsplit(":", 1)[0] for _, _, addr in tasks)
        return Cluster("tf_config", rank, len(tasks), hosts, tf_config=config)


def ordered_tasks(config: dict[str, Any]) -> list[tuple[str, int, str]]:
    """(type, index, address) of every task of a TF_CONFIG, in rank order."""
    types = sorted(config["cluster"], key=lambda t: (_TYPE_ORDER + (t, )).index(t))
    return [(t, i, addr) for t in types for i, addr in enumerate(config["cluster"][t])]


def parse_tf_config(raw: str) -> dict[str, Any]:
    """TF_CONFIG as a dict, or a ClusterError saying what is wrong with it."""
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ClusterError(f"TF_CONFIG is not valid JSON ({e.msg} at position {e.pos}): "
                           f"received {raw!r}. {_EXPECTED}") from None
    if not isinstance(config, dict) or not isinstance(config.get("cluster"), dict):
        raise ClusterError(f"TF_CONFIG has no 'cluster' object: received {raw!r}. {_EXPECTED}")
    cluster = config["cluster"]
    for task_type, addrs in cluster.items():
        if not isinstance(addrs, list) or not addrs:
            raise ClusterError(f"TF_CONFIG cluster[{task_type!r}] must be a non-empty list of "
                               f"'host:port' strings; received {addrs!r}.")
        for addr in addrs:
            host, _, port = str(addr).rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ClusterError(f"TF_CONFIG cluster[{task_type!r}] holds {addr!r}; expected "
                                   "'host:port' with a port in 1..65535.")
    if len(cluster.get("chief", [])) > 1:
        raise ClusterError(f"TF_CONFIG names {len(cluster['chief'])} chiefs "
                           f"({cluster['chief']}); a cluster has at most one chief.")
    task = config.get("task")
    if not isinstance(task, dict) or "type" not in task:
        raise ClusterError(f"TF_CONFIG has no 'task' with a 'type': received {raw!r}. {_EXPECTED}")
    if task["type"] not in cluster:
        raise ClusterError(f"TF_CONFIG task type {task['type']!r} is not in its cluster, which "
                           f"has {sorted(cluster)}. Set task.type to one of them.")
    index = task.get("index", 0)
    size = len(cluster[task["type"]])
    if not isinstance(index, int) or not 0 <= index < size:
        raise ClusterError(f"TF_CONFIG task index {index!r} is out of range: cluster has {size} "
                           f"{task['type']!r} task(s), so expected 0..{size - 1}.")
    config["task"] = dict(task, index=index)
    return config
