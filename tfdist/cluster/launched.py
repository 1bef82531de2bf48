"""Launchers that tell each process its own rank and the world size, but not where the other
ranks run (MPI's `mpirun`/`mpiexec`, PALS, `flux run`, `jsrun`): the common part of their
environments. Each launcher is a subclass naming its variables (tfdist.cluster.mpi, .flux, .lsf).

On one node every rank is on `localhost`. On several, the ranks exchange their hosts through a
shared directory (tfdist.cluster.host_exchange), in a directory named by the launcher's id for the
launch, else the batch job's (Slurm, PBS, LSF), else TFDIST_RENDEZVOUS_ID.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Optional

from tfdist import env_vars
from tfdist.cluster.base import Cluster, ClusterEnv, env_int, first_of
from tfdist.cluster.errors import ClusterError
from tfdist.cluster.host_exchange import exchange_hosts

# A batch job's id, for a launcher that names no launch of its own (one launch per job step).
SCHEDULER_IDS = (("SLURM_JOB_ID", "SLURM_STEP_ID"), ("PBS_JOBID", ), ("LSB_JOBID", ),
                 ("FLUX_JOB_ID", ))
RENDEZVOUS_ID = env_vars.RENDEZVOUS_ID.name
LOCALHOST = "localhost"


class LaunchedEnv(ClusterEnv):
    """Set RANK and SIZE; the rest where the launcher sets them."""

    launcher: str = ""  # as its users know it, e.g. "Open MPI (mpirun)"
    RANK: str = ""
    SIZE: str = ""
    LOCAL_RANK: str = ""
    LOCAL_SIZE: str = ""
    NUM_NODES: str = ""
    MARKERS: tuple[str, ...] = ()  # set only by this launcher (tells it from others)
    HOST: tuple[str, ...] = ()  # this node's name as the launcher knows it (else the hostname)
    LAUNCH_ID: tuple[str, ...] = ()  # the same on every rank of one launch

    @classmethod
    def reads(cls) -> tuple[str, ...]:
        """Every variable this environment reads (the generated reference lists them)."""
        names = (cls.RANK, cls.SIZE, cls.LOCAL_RANK, cls.LOCAL_SIZE, cls.NUM_NODES, *cls.MARKERS,
                 *cls.HOST, *cls.LAUNCH_ID)
        return tuple(dict.fromkeys(n for n in names if n))

    @classmethod
    def is_present(cls, environ: Mapping[str, str]) -> bool:
        return all(environ.get(name) for name in (cls.RANK, cls.SIZE, *cls.MARKERS))

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> Cluster:
        hint = f"{cls.launcher} sets it for every process it starts."
        rank, size = env_int(environ, cls.RANK, hint), env_int(environ, cls.SIZE, hint)
        if not 0 <= rank < size:
            raise ClusterError(f"{cls.RANK}={rank} is out of range for {cls.SIZE}={size}: "
                               f"expected 0..{size - 1}. Are both from one {cls.launcher}?")
        launch = cls.launch_id(environ)
        if cls.one_node(environ, size):
            hosts = (LOCALHOST, ) * size
        else:
            if launch is None:
                raise ClusterError(
                    f"{cls.launcher} started rank {rank} of {size} on several nodes without "
                    f"naming the launch ({', '.join(cls.LAUNCH_ID) or 'no variable'}), outside "
                    f"any batch job: the ranks cannot find each other. Give every rank the same "
                    f"{RENDEZVOUS_ID}, e.g. `export {RENDEZVOUS_ID}=$RANDOM` before the launcher "
                    f"(mpiexec passes your environment on; Open MPI's mpirun needs "
                    f"`-x {RENDEZVOUS_ID}`).")
            host = (first_of(environ, cls.HOST) or ("", socket.gethostname()))[1]
            hosts = exchange_hosts(f"{cls.name}-{launch}", rank, size, host, environ)
        cluster = Cluster(cls.name, rank, size, hosts, job_id=launch)
        cls._check_local_rank(environ, cluster)
        return cluster

    @classmethod
    def launch_id(cls, environ: Mapping[str, str]) -> Optional[str]:
        own = first_of(environ, cls.LAUNCH_ID) or first_of(environ, (RENDEZVOUS_ID, ))
        if own:
            return own[1]
        for names in SCHEDULER_IDS:
            if all(environ.get(n) for n in names):
                return ".".join(environ[n] for n in names)
        return None

    @classmethod
    def one_node(cls, environ: Mapping[str, str], size: int) -> bool:
        if size == 1:
            return True
        if cls.NUM_NODES and environ.get(cls.NUM_NODES, "").isdigit():
            return int(environ[cls.NUM_NODES]) == 1
        return bool(cls.LOCAL_SIZE) and environ.get(cls.LOCAL_SIZE) == str(size)

    @classmethod
    def _check_local_rank(cls, environ: Mapping[str, str], cluster: Cluster) -> None:
        if not (cls.LOCAL_RANK and environ.get(cls.LOCAL_RANK, "").isdigit()):
            return
        said = int(environ[cls.LOCAL_RANK])
        if said != cluster.local_rank:
            raise ClusterError(
                f"{cls.LOCAL_RANK}={said}, but rank {cluster.rank} is process "
                f"{cluster.local_rank} of {cluster.local_world_size} on {cluster.host} by the "
                f"hosts the ranks gave ({', '.join(cluster.task_hosts)}): the processes of one "
                "node do not agree on its name. Set each node's name the same way on all ranks "
                "(the launcher's host file and the nodes' hostnames).")
