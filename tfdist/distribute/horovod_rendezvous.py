"""Horovod's gloo tasks meeting without horovodrun: the variables horovodrun would set, rank 0's
rendezvous server, every task's check-in, and the network addresses they use.

Under `srun`, `tfdist launch` or mpirun nobody runs horovodrun. So every task gets the HOROVOD_*
variables horovodrun would have set (`Roles.horovod`, set_horovod_environ), rank 0 serves
Horovod's own HTTP rendezvous (the server horovodrun starts) on the port the cluster layer chose,
and `hvd.init()` then forms the gloo rings. Before that, every task checks in at the rendezvous
(check_in), so a task that never starts ends the others with an error naming it after
HOROVOD_GLOO_TIMEOUT_SECONDS instead of a hang. The Horovod engine
(tfdist.distribute.horovod_engine) runs these steps in that order.

Horovod is imported inside the functions only, and TensorFlow never: importing this module is
cheap.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, MutableMapping
from typing import Optional

from tfdist.cluster.base import Cluster
from tfdist.cluster.horovodrun import OWNED as OWNED_VAR
from tfdist.cluster.roles import Roles, horovod_environ
from tfdist.distribute.horovod_setup import HorovodSetupError

TIMEOUT_VAR = "HOROVOD_GLOO_TIMEOUT_SECONDS"
DEFAULT_TIMEOUT = 30.0  # Horovod's own default for HOROVOD_GLOO_TIMEOUT_SECONDS
CHECK_IN_SCOPE = "tfdist"  # an ad-hoc scope of the rendezvous store where the tasks check in

# ---------------------------------------------------------------------------------------------
# The environment of hvd.init()


def gloo_timeout(environ: Mapping[str, str]) -> float:
    """HOROVOD_GLOO_TIMEOUT_SECONDS, else Horovod's default (30 s)."""
    raw = environ.get(TIMEOUT_VAR)
    try:
        return float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        raise HorovodSetupError(f"{TIMEOUT_VAR}={raw!r} is not a number of seconds.") from None


def set_horovod_environ(roles: Roles,
                        environ: Optional[MutableMapping[str, str]] = None) -> dict[str, str]:
    """Write the roles' HOROVOD_* variables (and the gloo interface) into `environ`; returns what
    was written. A HOROVOD_GLOO_IFACE the user set is kept."""
    environ = os.environ if environ is None else environ
    if roles.horovod is None:
        raise HorovodSetupError(f"The roles are for strategy {roles.strategy!r}, not horovod: "
                                "build them with build_roles(cluster, 'horovod').")
    values = dict(roles.horovod)
    if not environ.get("HOROVOD_GLOO_IFACE"):
        iface = gloo_iface_towards(values["HOROVOD_GLOO_RENDEZVOUS_ADDR"],
                                   int(values["HOROVOD_GLOO_RENDEZVOUS_PORT"]))
        if iface:
            values["HOROVOD_GLOO_IFACE"] = iface
    if roles.horovod["HOROVOD_SIZE"] == "1":
        # One task: gloo keeps its rendezvous in memory, no server needed.
        for name in ("HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_PORT"):
            values.pop(name, None)
            environ.pop(name, None)
    values[OWNED_VAR] = "1"
    environ.update(values)
    return values


# ---------------------------------------------------------------------------------------------
# Addresses


def rendezvous_bind_address(cluster: Cluster, addr: str) -> str:
    """The one IPv4 address of this host (rank 0's) that the rendezvous listens on: the address
    the other ranks reach `addr` at, not every interface.

    That is `addr` resolved here, unless it resolves to a loopback address while some ranks run
    on other hosts (e.g. Debian's `127.0.1.1 HOSTNAME` line): then it is this host's address on
    the route towards them.
    """
    try:
        here = socket.gethostbyname(addr)
    except OSError as err:
        raise HorovodSetupError(f"Rank 0 cannot resolve its own host name {addr!r} ({err}), "
                                "which the other ranks use to reach its Horovod rendezvous. "
                                "Fix the node's name resolution (/etc/hosts or DNS).") from err
    others = sorted({h for h in cluster.task_hosts if h != cluster.task_hosts[0]})
    if not others or not here.startswith("127."):
        return here
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((socket.gethostbyname(others[0]), 9))  # UDP: picks a route, sends nothing
            return probe.getsockname()[0]
    except OSError as err:
        raise HorovodSetupError(
            f"Rank 0's host name {addr!r} resolves to {here} here (loopback), and rank 0 finds "
            f"no route to host {others[0]} of the other ranks ({err}). Fix the node's name "
            "resolution so that its name gives the address the other nodes reach it at.") from err


def gloo_iface_towards(addr: str, port: int) -> Optional[str]:
    """The name of the network interface this host uses to reach addr (e.g. "lo" for localhost).

    Without HOROVOD_GLOO_IFACE, gloo listens on the address of this machine's hostname, which on
    nodes with several networks (or network namespaces) may be one the peers cannot reach.
    """
    import psutil  # a dependency of Horovod

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((socket.gethostbyname(addr), port))  # UDP: picks a route, sends nothing
            local_ip = probe.getsockname()[0]
    except OSError:
        return None
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == local_ip for a in addresses):
            return name
    return None


# ---------------------------------------------------------------------------------------------
# The server (rank 0) and the check-in (every rank)


def host_alloc_plan(cluster: Cluster) -> list:
    """Horovod's SlotInfo of every rank, as horovodrun's `get_host_assignments` would make them:
    the rendezvous server learns from it how many tasks each global, local and cross ring has."""
    import dataclasses

    from horovod.runner.common.util.hosts import SlotInfo

    plan = []
    for rank in range(cluster.world_size):
        env = horovod_environ(dataclasses.replace(cluster, rank=rank), 0)
        plan.append(
            SlotInfo(hostname=env["HOROVOD_HOSTNAME"],
                     rank=rank,
                     local_rank=int(env["HOROVOD_LOCAL_RANK"]),
                     cross_rank=int(env["HOROVOD_CROSS_RANK"]),
                     size=cluster.world_size,
                     local_size=int(env["HOROVOD_LOCAL_SIZE"]),
                     cross_size=int(env["HOROVOD_CROSS_SIZE"])))
    return plan


class RendezvousService:
    """Horovod's rendezvous HTTP server (the one horovodrun runs) on one address and a fixed port,
    served from a daemon thread: it ends with the process, or earlier with `stop()`.

    Anyone who reaches the port can read and write its keys (Horovod's clients send no secret:
    docs/security.md), so it listens only on the address the ranks use and only until every rank
    has initialised Horovod (the Horovod engine stops it then)."""

    def __init__(self, cluster: Cluster, host: str, port: int, verbose: bool = False):
        from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

        try:
            # IPv4: Horovod's HTTP client speaks IPv4 only.
            self._httpd = RendezvousHTTPServer((host, port), RendezvousHandler, verbose)
        except OSError as err:
            raise HorovodSetupError(
                f"Rank 0 cannot serve the Horovod rendezvous on port {port} of {host}: {err}. "
                "Another job may use that port: choose another base port (--port, or "
                "TFDIST_PORT)") from err
        self.host, self.port = host, port
        self._httpd.init(host_alloc_plan(cluster))
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.2},
                                        name="tfdist-horovod-rendezvous",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join()
        self._httpd.server_close()


def serve_rendezvous(cluster: Cluster,
                     port: int,
                     verbose: bool = False,
                     host: str = "127.0.0.1") -> RendezvousService:
    """Start the gloo rendezvous for `cluster` on `host`:`port` of this host (rank 0 only)."""
    if cluster.rank != 0:
        raise HorovodSetupError(f"Only rank 0 serves the Horovod rendezvous; this is rank "
                                f"{cluster.rank}.")
    return RendezvousService(cluster, host, port, verbose)


def _url(addr: str, port: int, key: str) -> str:
    return f"http://{addr}:{port}/{CHECK_IN_SCOPE}/{key}"


def check_in(cluster: Cluster, addr: str, port: int, timeout: float) -> None:
    """Tell the rendezvous at addr:port that this rank is here, then wait until every rank is.

    Raises HorovodSetupError naming the missing ranks and hosts (or the unreachable rendezvous)
    after `timeout` seconds: without it, Horovod's gloo either aborts the process from a C++
    thread or, before rank 0 is up, gives up after 1.5 s.
    """
    deadline = time.monotonic() + timeout
    body = json.dumps({"host": cluster.host, "pid": os.getpid()}).encode()
    put = urllib.request.Request(_url(addr, port, f"rank_{cluster.rank}"), data=body, method="PUT")
    last_error: Optional[Exception] = None
    while True:
        try:
            with urllib.request.urlopen(put, timeout=5):
                break
        except (urllib.error.URLError, OSError) as err:
            last_error = err
        if time.monotonic() > deadline:
            raise HorovodSetupError(
                f"Horovod rank {cluster.rank} on {cluster.host}: the rendezvous of rank 0 at "
                f"{addr}:{port} did not answer within {timeout:g} s ({last_error}). Rank 0 "
                f"(host {cluster.task_hosts[0]}) did not start or failed before serving it; see "
                f"its log. Raise {TIMEOUT_VAR} if tasks start slowly.")
        time.sleep(0.2)

    missing = list(range(cluster.world_size))
    while True:
        missing = [rank for rank in missing if not _checked_in(addr, port, rank)]
        if not missing:
            return
        if time.monotonic() > deadline:
            hosts = sorted({cluster.task_hosts[rank] for rank in missing})
            raise HorovodSetupError(
                f"Horovod rank {cluster.rank}: rank(s) {', '.join(map(str, missing))} of "
                f"{cluster.world_size} (host(s) {', '.join(hosts)}) did not reach the rendezvous "
                f"at {addr}:{port} within {timeout:g} s. They did not start or failed first; see "
                f"their logs. Raise {TIMEOUT_VAR} if tasks start slowly.")
        time.sleep(0.2)


def _checked_in(addr: str, port: int, rank: int) -> bool:
    try:
        with urllib.request.urlopen(_url(addr, port, f"rank_{rank}"), timeout=5):
            return True
    except (urllib.error.URLError, OSError):  # 404 (an HTTPError) until the rank checks in
        return False
