"""Slurm host lists and tasks-per-node strings, expanded exactly (zero padding kept).

Both parsers come from python-hostlist, which keeps zero padding (`o[009-011]` -> o009, o010, o011)
where TensorFlow's SlurmClusterResolver drops it; this module only turns its errors into ours.
"""

import hostlist as _hostlist

from tfdist.cluster.errors import ClusterError


def expand_hosts(nodelist: str, source: str = "node list") -> list[str]:
    """`n[0001-0002],m5` -> ["n0001", "n0002", "m5"]."""
    try:
        hosts = _hostlist.expand_hostlist(nodelist.strip())
    except _hostlist.BadHostlist as e:
        raise ClusterError(f"Cannot parse {source} {nodelist!r}: {e}. Expected a Slurm host list "
                           "such as 'node[01-04],gpu7'.") from None
    if not hosts:
        raise ClusterError(f"{source} is empty; expected at least one host name.")
    return hosts


def expand_tasks_per_node(spec: str, source: str = "tasks per node") -> list[int]:
    """`3(x2),2,11(x4)` -> [3, 3, 2, 11, 11, 11, 11]."""
    try:
        counts = _hostlist.parse_slurm_tasks_per_node(spec.strip())
    except (_hostlist.BadHostlist, ValueError) as e:
        raise ClusterError(f"Cannot parse {source} {spec!r}: {e}. Expected Slurm's form such as "
                           "'2(x3),1'.") from None
    if not counts or any(c < 1 for c in counts):
        raise ClusterError(f"Cannot parse {source} {spec!r}: every node needs at least one task.")
    return counts
