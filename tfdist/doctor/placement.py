"""Checks of where this task stands: its role in the cluster, its port, the other nodes' names."""

from __future__ import annotations

import concurrent.futures
import socket
from collections.abc import Callable, Mapping
from typing import Any, Optional

from tfdist.cluster import Cluster, ClusterError, Roles, build_roles, check_port_free, detect
from tfdist.doctor.result import INFO, OK, PROBLEM, Result


def check_cluster(
    strategy: str,
    num_ps: Optional[int] = None,
    evaluator: Optional[bool] = None,
    port: Optional[int] = None,
    environ: Optional[Mapping[str,
                              str]] = None) -> tuple[Result, Optional[Cluster], Optional[Roles]]:
    """The environment and this task's role; a ClusterError is a problem, with its message."""
    try:
        cluster = detect(environ)
        roles = build_roles(cluster, strategy, num_ps=num_ps, evaluator=evaluator, port=port)
    except ClusterError as e:
        return Result("cluster", PROBLEM, str(e)), None, None
    role = "" if roles.task_type is None else f", task {roles.task_type}:{roles.task_index}"
    job = f", job {cluster.job_id}" if cluster.job_id else ""
    message = (f"{cluster.environment}{job}: rank {cluster.rank} of {cluster.world_size} on "
               f"{cluster.host} (node {cluster.node_rank + 1} of {len(cluster.nodes)}, local rank "
               f"{cluster.local_rank} of {cluster.local_world_size}), strategy {roles.strategy}"
               f"{role}")
    return Result("cluster", OK, message), cluster, roles


def check_port(cluster: Cluster, roles: Roles) -> Result:
    """This task's server port can be bound here (when its role runs a server)."""
    if cluster.world_size == 1:
        return Result("port", OK, "one task: it runs no server, no port needed")
    if roles.port is None:
        return Result(
            "port", OK, f"rank {cluster.rank} runs no server under strategy "
            f"{roles.strategy}; no port needed")
    try:
        check_port_free(roles.port, cluster.host, cluster.rank)
    except ClusterError as e:
        return Result("port", PROBLEM, str(e))
    return Result("port", OK, f"{roles.port} free on {cluster.host} (rank {cluster.rank})")


SECURITY_PAGE = "docs/security.md"


def check_network(cluster: Cluster, roles: Roles) -> Optional[Result]:
    """On a job of several nodes: which of its ports accept anyone who reaches them (None on one
    node, where nothing listens beyond what the node's own users reach)."""
    if len(cluster.nodes) < 2:
        return None
    if roles.horovod is not None:
        opens = (f"rank 0 serves Horovod's rendezvous on port "
                 f"{roles.horovod['HOROVOD_GLOO_RENDEZVOUS_PORT']} of {cluster.task_hosts[0]} "
                 "until every rank has started, and gloo connects the ranks directly")
    elif roles.port is not None:
        opens = (f"every task runs TensorFlow's gRPC server (this one on port {roles.port}, "
                 "all interfaces) for the whole job")
    else:
        return None
    return Result(
        "network", INFO, f"{len(cluster.nodes)} nodes: {opens}, without authentication: anyone "
        "who reaches these ports can read or change the training. Run on a private network or "
        f"behind the cluster's firewall; see {SECURITY_PAGE} in tfdist.")


def _is_loopback(address: str) -> bool:
    return address.startswith("127.") or address == "::1"


def check_hosts(cluster: Cluster,
                resolve: Callable[..., Any] = socket.getaddrinfo,
                timeout: float = 10.0) -> Result:
    """Every node name resolves here, and no other node resolves to this machine's loopback
    (in a job whose other nodes have network addresses)."""
    nodes = list(cluster.nodes)
    failed: dict[str, str] = {}
    only_loopback: dict[str, bool] = {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(nodes)))
    futures = {node: pool.submit(resolve, node, None) for node in nodes}
    done, _ = concurrent.futures.wait(futures.values(), timeout=timeout)
    pool.shutdown(wait=False)  # a lookup still hanging must not hold up the report
    for node, future in futures.items():
        if future not in done:
            failed[node] = f"no answer within {timeout:.0f} s"
        elif future.exception() is not None:
            e = future.exception()
            failed[node] = getattr(e, "strerror", None) or str(e)
        else:
            only_loopback[node] = all(_is_loopback(info[4][0]) for info in future.result())
    # All tasks on this machine (TF_CONFIG with localhost, tfdist launch) is fine; a job with real
    # network addresses where another node's name leads back here is not.
    loopback = [node for node, local in only_loopback.items()
                if local and node != cluster.host] if not all(only_loopback.values()) else []
    if failed:
        names = ", ".join(f"{node} ({why})" for node, why in failed.items())
        return Result(
            "hosts", PROBLEM,
            f"cannot resolve {names} from {cluster.host}; the tasks connect to each other by "
            "these names. Check the node names (SLURM_STEP_NODELIST/SLURM_JOB_NODELIST, or the "
            "hosts in TF_CONFIG) and that DNS or /etc/hosts on this node knows them.")
    if loopback:
        return Result(
            "hosts", PROBLEM,
            f"{', '.join(loopback)} resolve(s) to a loopback address on {cluster.host}, so this "
            "task would connect to itself instead of that node. Fix the node's entry in "
            "/etc/hosts (or DNS) to its network address.")
    return Result("hosts", OK, f"{len(nodes)} node name(s) resolve: {_short(nodes)}")


def _short(names: list[str], keep: int = 4) -> str:
    return ", ".join(names[:keep]) + (f", ... ({len(names)} in all)" if len(names) > keep else "")
