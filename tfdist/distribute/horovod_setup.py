"""Horovod on tfdist: the gloo rendezvous without horovodrun, and the Keras pieces the runtime uses.

Under `srun` or `tfdist launch` nobody runs horovodrun. So rank 0 serves Horovod's own HTTP
rendezvous (the server horovodrun starts) on the port the cluster layer chose, every task gets the
HOROVOD_* variables horovodrun would have set (`Roles.horovod`), and `hvd.init()` then forms the
gloo rings. Before that, every task checks in at the rendezvous, so a task that never starts ends
the others with an error naming it after HOROVOD_GLOO_TIMEOUT_SECONDS instead of a hang. The
same under mpirun and the other launchers tfdist reads. An environment made by horovodrun is used
as it is, and a Horovod built with MPI only initialises through mpirun's MPI.

`horovod.tensorflow.keras` is bound to tf-keras by tfdist.keras_compat.horovod_binding, whatever the
order of the user's imports.

TensorFlow and Horovod are imported inside the functions only: importing this module is cheap.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, MutableMapping
from typing import Any, Optional

from tfdist import env_vars
from tfdist.cluster.base import Cluster
from tfdist.cluster.local import LocalLaunchEnv
from tfdist.cluster.mpi import ENVIRONMENTS as MPI_LAUNCHERS
from tfdist.cluster.roles import Roles, horovod_environ
from tfdist.errors import ConfigError, TfdistError

log = logging.getLogger(__name__)

HOROVOD_VERSION = "0.28.1"
TIMEOUT_VAR = "HOROVOD_GLOO_TIMEOUT_SECONDS"
DEFAULT_TIMEOUT = 30.0  # Horovod's own default for HOROVOD_GLOO_TIMEOUT_SECONDS
OWNED_VAR = env_vars.HOROVOD.name  # set beside the HOROVOD_* variables that tfdist wrote itself
CHECK_IN_SCOPE = "tfdist"  # an ad-hoc scope of the rendezvous store where the tasks check in
INSTALL_HINT = ("Install it with `make horovod` in a tfdist checkout (builds Horovod "
                f"{HOROVOD_VERSION} with gloo against this TensorFlow once and caches the wheel), "
                "or `PYTHON=<your venv>/bin/python tools/build_horovod_wheel.sh --install` for "
                "TensorFlow 2.16-2.21; or use --strategy=multi_worker, which needs no Horovod.")
COMPRESSIONS = ("none", "fp16")
MPI_ENVIRONMENTS = frozenset(env.name for env in MPI_LAUNCHERS)

# What init_horovod set up in this process: the rendezvous server (rank 0) and the module.
_state: dict[str, Any] = {"server": None, "hvd": None}


class HorovodSetupError(TfdistError, RuntimeError):
    """Horovod is missing, or its tasks could not meet."""


# ---------------------------------------------------------------------------------------------
# Importing Horovod


def horovod_available() -> bool:
    """True when a Horovod package is installed (it is not imported)."""
    import importlib.util

    return importlib.util.find_spec("horovod") is not None


def import_horovod_keras():
    """`horovod.tensorflow.keras`, bound to tf.keras's Keras (keras_compat.horovod_binding)."""
    from tfdist.keras_compat import horovod_binding as horovod_keras

    try:
        return horovod_keras.import_horovod_keras()
    except ImportError as err:
        raise HorovodSetupError(f"Cannot import horovod.tensorflow.keras ({err}). "
                                f"{INSTALL_HINT}") from err


# ---------------------------------------------------------------------------------------------
# Which environment, and the rendezvous


def horovodrun_environment(environ: Optional[Mapping[str, str]] = None,
                           cluster: Optional[Cluster] = None) -> bool:
    """True when horovodrun set this process up with gloo (it sets HOROVOD_RANK, HOROVOD_SIZE and
    the rendezvous address). Under mpirun and the other launchers tfdist reads, tfdist sets
    Horovod's gloo up itself, as under srun (a Horovod built with MPI only: init_horovod).

    Variables tfdist wrote itself (marked with TFDIST_HOROVOD=1) and processes of `tfdist launch`
    do not count: there tfdist's own roles apply. Nor do HOROVOD_* variables that a task of an
    srun step with several tasks inherited from its batch script (e.g. an exported `tfdist env`)
    when they disagree with the task's Slurm rank or size.
    """
    environ = os.environ if environ is None else environ
    if environ.get(OWNED_VAR) == "1" or LocalLaunchEnv.is_present(environ):
        return False
    gloo = all(name in environ
               for name in ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_GLOO_RENDEZVOUS_ADDR"))
    # A Slurm cluster of several tasks is always an srun step (the cluster layer refuses the rest).
    if gloo and cluster is not None and cluster.environment == "slurm" and cluster.world_size > 1:
        slurm = (str(cluster.rank), str(cluster.world_size))
        if slurm != (environ["HOROVOD_RANK"], environ["HOROVOD_SIZE"]):
            log.warning(
                "Ignoring HOROVOD_RANK=%s HOROVOD_SIZE=%s inherited by Slurm task %s of %s; "
                "tfdist sets Horovod up from Slurm.", environ["HOROVOD_RANK"],
                environ["HOROVOD_SIZE"], *slurm)
            return False
    return gloo


def launcher_local_rank(cluster: Cluster,
                        environ: Optional[Mapping[str, str]] = None) -> Optional[tuple[int, int]]:
    """(local rank, local size) that horovodrun gave this process, which then pick its GPU; None
    when tfdist sets Horovod up itself (the cluster's local rank applies)."""
    environ = os.environ if environ is None else environ
    if not horovodrun_environment(environ, cluster):
        return None
    rank, size = environ.get("HOROVOD_LOCAL_RANK", ""), environ.get("HOROVOD_LOCAL_SIZE", "")
    return (int(rank), int(size)) if rank.isdigit() and size.isdigit() else None


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


class RendezvousService:
    """Horovod's rendezvous HTTP server (the one horovodrun runs) on one address and a fixed port,
    served from a daemon thread: it ends with the process, or earlier with `stop()`.

    Anyone who reaches the port can read and write its keys (Horovod's clients send no secret:
    docs/security.md), so it listens only on the address the ranks use and only until every rank
    has initialised Horovod (init_horovod stops it then)."""

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


def _timeout(timeout: Optional[float], environ: Mapping[str, str]) -> float:
    if timeout is not None:
        return float(timeout)
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


def init_horovod(cluster: Cluster,
                 roles: Optional[Roles],
                 timeout: Optional[float] = None,
                 verbose: bool = False):
    """Set Horovod up for this task and return `horovod.tensorflow.keras` (as `hvd`).

    - horovodrun made the environment: used as it is, `hvd.init()`; so is an MPI launcher's
      for a Horovod built with MPI only.
    - otherwise (srun, `tfdist launch`): HOROVOD_* from `roles.horovod`, rank 0 serves the
      rendezvous on the address the other ranks reach it at, every rank checks in
      (HorovodSetupError naming the missing ranks after `timeout` s, default
      HOROVOD_GLOO_TIMEOUT_SECONDS or 30), then `hvd.init()`, and rank 0 stops the rendezvous
      once every rank has initialised (unless dynamic process sets or elastic mode need it).
    Then checks that Horovod's rank and size are the cluster's (or horovodrun's).
    """
    hvd = _state["hvd"]
    if hvd is not None and hvd.is_initialized():
        return hvd
    hvd = import_horovod_keras()
    seconds = _timeout(timeout, os.environ)
    own_rendezvous = False
    if horovodrun_environment(cluster=cluster):
        log.info("Horovod: using the environment of horovodrun as it is.")
        expected = None
        if "HOROVOD_RANK" in os.environ:
            expected = (int(os.environ["HOROVOD_RANK"]), int(os.environ["HOROVOD_SIZE"]))
        hvd.init()
    elif cluster.environment in MPI_ENVIRONMENTS and hvd.mpi_built() and not hvd.gloo_built():
        log.info("Horovod: built with MPI only; it initialises through %s's MPI.",
                 cluster.environment)
        expected = (cluster.rank, cluster.world_size)
        hvd.init()
    else:
        os.environ[TIMEOUT_VAR] = f"{seconds:g}"  # gloo's own timeouts, the same as ours
        env = set_horovod_environ(roles)
        if cluster.world_size > 1:
            addr = env["HOROVOD_GLOO_RENDEZVOUS_ADDR"]
            port = int(env["HOROVOD_GLOO_RENDEZVOUS_PORT"])
            if cluster.rank == 0:
                _stop_server()
                _state["server"] = serve_rendezvous(cluster, port, verbose,
                                                    rendezvous_bind_address(cluster, addr))
            try:
                check_in(cluster, addr, port, seconds)
            except HorovodSetupError:
                _stop_server()
                raise
        expected = (cluster.rank, cluster.world_size)
        own_rendezvous = cluster.world_size > 1
        hvd.init()
    if expected is not None and (hvd.rank(), hvd.size()) != expected:
        got = (hvd.rank(), hvd.size())
        hvd.shutdown()
        raise HorovodSetupError(
            f"Horovod started as rank {got[0]} of {got[1]}, but this task is rank {expected[0]} "
            f"of {expected[1]}. Is this Horovod built with gloo (`horovodrun --check-build`)?")
    if own_rendezvous:
        _close_rendezvous(hvd)
    _state["hvd"] = hvd
    log.info("Horovod rank %d of %d (local rank %d of %d) ready.", hvd.rank(), hvd.size(),
             hvd.local_rank(), hvd.local_size())
    return hvd


# Horovod needs its rendezvous after hvd.init() only to add process sets later, or to re-form the
# rings of an elastic job (measured: docs/security.md).
RENDEZVOUS_AFTER_INIT = ("HOROVOD_DYNAMIC_PROCESS_SETS", "HOROVOD_ELASTIC")


def _close_rendezvous(hvd) -> None:
    """Every rank: wait until all ranks have initialised Horovod (then no rank talks to the
    rendezvous any more: each ends its gloo rendezvous with a barrier and a last DELETE before its
    hvd.init() returns), then rank 0 stops serving it. Kept for a job that needs it later."""
    import tensorflow as tf

    later = [v for v in RENDEZVOUS_AFTER_INIT if os.environ.get(v, "").lower() in ("1", "true")]
    if later:
        if _state["server"] is not None:
            log.info("Horovod rendezvous kept open for the whole job: %s is set.", later[0])
        return
    hvd.allreduce(tf.constant(0.0), name="tfdist_rendezvous_done", op=hvd.Sum)
    if _state["server"] is not None:
        server = _state["server"]
        _stop_server()
        log.debug("Horovod rendezvous on %s:%d closed: every rank has initialised.", server.host,
                  server.port)


def _stop_server() -> None:
    server, _state["server"] = _state["server"], None
    if server is not None:
        server.stop()


# ---------------------------------------------------------------------------------------------
# What the runtime asks of the engine


def _hvd():
    hvd = _state["hvd"]
    if hvd is None or not hvd.is_initialized():
        raise HorovodSetupError("Horovod is not initialised in this process: call init_horovod "
                                "first.")
    return hvd


def distributed_optimizer(optimizer,
                          compression: str = "none",
                          backward_passes_per_step: int = 1,
                          average_aggregated_gradients: bool = True,
                          **kwargs):
    """Horovod's DistributedOptimizer around a tf_keras optimizer: gradients averaged across the
    ranks, optionally sent as fp16, and applied every `backward_passes_per_step` batches (the
    aggregated gradients averaged, so the learning rate means the same as with one pass)."""
    if compression not in COMPRESSIONS:
        raise ConfigError(
            f"compression={compression!r}: expected one of {', '.join(COMPRESSIONS)}.")
    if backward_passes_per_step < 1:
        raise ConfigError(f"backward_passes_per_step={backward_passes_per_step}: expected >= 1.")
    hvd = _hvd()
    return hvd.DistributedOptimizer(optimizer,
                                    compression=getattr(hvd.Compression, compression),
                                    backward_passes_per_step=backward_passes_per_step,
                                    average_aggregated_gradients=average_aggregated_gradients,
                                    **kwargs)


def horovod_callbacks(root_rank: int = 0) -> list:
    """Broadcast of the initial variables from `root_rank`, and metric averaging across ranks.
    Put them before callbacks that read the metrics (checkpoints, loggers)."""
    hvd = _hvd()
    return [
        hvd.callbacks.BroadcastGlobalVariablesCallback(root_rank),
        hvd.callbacks.MetricAverageCallback(),
    ]


def input_context():
    """The tf.distribute.InputContext of this rank: one input pipeline per rank."""
    import tensorflow as tf

    hvd = _hvd()
    return tf.distribute.InputContext(num_input_pipelines=hvd.size(),
                                      input_pipeline_id=hvd.rank(),
                                      num_replicas_in_sync=hvd.size())


def barrier() -> None:
    """Wait until every rank is here (an allreduce of one number: Horovod 0.28's TensorFlow API
    has no barrier)."""
    import tensorflow as tf

    hvd = _hvd()
    hvd.allreduce(tf.constant(0.0), name="tfdist_barrier", op=hvd.Sum)


def shutdown() -> None:
    """Shut Horovod down and stop the rendezvous server; safe to call twice."""
    hvd = _state["hvd"]
    if hvd is not None and hvd.is_initialized():
        hvd.shutdown()
    _state["hvd"] = None
    _stop_server()
