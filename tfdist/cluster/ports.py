"""Which port each task listens on, and a bind check before any server starts.

Task port = base + local rank. Without an override the base is derived from the job id (Slurm's,
or a launcher's) inside 20000..31999: below Linux's ephemeral range (32768..60999), so no outgoing
connection can hold it, and different jobs sharing a node get different bases.
"""

from __future__ import annotations

import errno
import os
import random
import socket
import zlib
from collections.abc import Mapping
from typing import Optional

from tfdist import env_vars
from tfdist.cluster.errors import ClusterError

PORT_ENV = env_vars.PORT.name
DEFAULT_BASE = 20000
_SLOT = 16  # ports reserved per job: room for 16 tasks per node
_SLOTS = 750  # 20000 + 750 * 16 = 32000
_HOW_TO_CHANGE = (f"Choose another base port with --port=P or {PORT_ENV}=P "
                  "(task ports are P + local rank).")


def port_base(job_id: Optional[str] = None,
              override: Optional[int] = None,
              launcher_base: Optional[int] = None,
              environ: Optional[Mapping[str, str]] = None) -> int:
    """The base port: --port, else $TFDIST_PORT, else the launcher's, else from the job id."""
    environ = os.environ if environ is None else environ
    if override is not None:
        return _valid(override, "--port")
    if environ.get(PORT_ENV):
        raw = environ[PORT_ENV]
        if not raw.strip().isdigit():
            raise ClusterError(f"{PORT_ENV}={raw!r} is not a port number; expected an integer in "
                               f"1024..65535. {_HOW_TO_CHANGE}")
        return _valid(int(raw), PORT_ENV)
    if launcher_base is not None:
        return _valid(launcher_base, "the launcher's port")
    if job_id:
        # Other launchers' ids need not be numbers (PMIx namespaces, Flux's f58 ids).
        number = int(job_id) if job_id.isdigit() else zlib.crc32(job_id.encode())
        return DEFAULT_BASE + (number % _SLOTS) * _SLOT
    return DEFAULT_BASE


def task_port(base: int, local_rank: int) -> int:
    port = base + local_rank
    if port > 65535:
        raise ClusterError(f"Base port {base} + local rank {local_rank} = {port} is above 65535. " +
                           _HOW_TO_CHANGE)
    return port


def check_port_free(port: int, host: str, rank: int) -> None:
    """Raise a ClusterError naming host, port and rank when `port` cannot be bound here."""
    error = _bind_error(port)
    if error is not None:
        reason = "already in use" if error.errno == errno.EADDRINUSE else error.strerror
        raise ClusterError(f"Port {port} on host {host} (rank {rank}) is {reason}; the task "
                           f"cannot start its server there. {_HOW_TO_CHANGE}")


def free_port_base(n: int, attempts: int = 200) -> int:
    """A random base port with base .. base+n-1 all free here (for one-machine launches)."""
    rng = random.Random()
    for _ in range(attempts):
        base = DEFAULT_BASE + rng.randrange(0, _SLOTS * _SLOT - n)
        if all(_bind_error(base + i) is None for i in range(n)):
            return base
    raise ClusterError(f"Found no {n} consecutive free ports in 20000..31999 after {attempts} "
                       f"tries. {_HOW_TO_CHANGE}")


def _bind_error(port: int) -> Optional[OSError]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # Same option gRPC uses: a port left in TIME_WAIT by the previous job is reusable.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError as e:
            return e
    return None


def _valid(port: int, source: str) -> int:
    if not 1024 <= port <= 65535:
        raise ClusterError(f"{source}={port} is out of range: expected a port in 1024..65535 "
                           "(ports below 1024 need root). " + _HOW_TO_CHANGE)
    return port
