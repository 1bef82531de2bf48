"""horovodrun (Horovod's own launcher, with gloo): the ranks it gave this process.

horovodrun sets HOROVOD_RANK, HOROVOD_SIZE, their local and cross counterparts and the address of
its rendezvous for every process it starts, and Horovod initialises from them as they are. tfdist
reads them here for what it sets up around Horovod: the Horovod engine then uses horovodrun's
environment (and checks Horovod's rank and size against it), and the GPU follows horovodrun's local
rank. They ride on the Cluster that detection finds (`Cluster.horovodrun`), whose own ranks stay
the environment's (a single local process where there is no other): horovodrun says nothing of
where the other ranks run.

Not horovodrun's (tfdist sets Horovod up itself, from the cluster): variables that tfdist wrote
(marked with TFDIST_HOROVOD=1), processes of `tfdist launch`, HOROVOD_* without a rendezvous
address, and those that a task of an srun step of several inherited from its batch script (e.g.
an exported `tfdist env`) when they disagree with the task's Slurm rank or size. Under mpirun and
the other launchers tfdist reads, tfdist sets Horovod's gloo up itself, as under srun.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Optional

from tfdist import env_vars
from tfdist.cluster.base import Cluster, HorovodrunRanks, env_int
from tfdist.cluster.local import LocalLaunchEnv

RANK, SIZE = "HOROVOD_RANK", "HOROVOD_SIZE"
LOCAL_RANK, LOCAL_SIZE = "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"
RENDEZVOUS = "HOROVOD_GLOO_RENDEZVOUS_ADDR"
OWNED = env_vars.HOROVOD.name  # set beside the HOROVOD_* variables that tfdist wrote itself


def read(environ: Mapping[str, str],
         cluster: Optional[Cluster] = None) -> Optional[HorovodrunRanks]:
    """horovodrun's ranks when it set this process up with gloo, else None (see the module's
    docstring); `cluster` is what the other environments read (it tells an srun step's stale
    variables)."""
    if not _horovodrun_variables(environ) or inherited(environ, cluster):
        return None
    hint = "horovodrun sets it for every process it starts."
    local_rank, local_size = environ.get(LOCAL_RANK, ""), environ.get(LOCAL_SIZE, "")
    local = None
    if local_rank.isdigit() and local_size.isdigit():
        local = (int(local_rank), int(local_size))
    return HorovodrunRanks(env_int(environ, RANK, hint), env_int(environ, SIZE, hint), local)


def inherited(environ: Mapping[str, str], cluster: Optional[Cluster]) -> Optional[str]:
    """Why horovodrun's variables are ignored when a task of an srun step of several inherited
    them (they disagree with its Slurm rank or size), for a warning; else None."""
    # A Slurm cluster of several tasks is always an srun step (the cluster layer refuses the rest).
    if (not _horovodrun_variables(environ) or cluster is None or cluster.environment != "slurm"
            or cluster.world_size <= 1):
        return None
    slurm = (str(cluster.rank), str(cluster.world_size))
    if slurm == (environ[RANK], environ[SIZE]):
        return None
    return (f"Ignoring {RANK}={environ[RANK]} {SIZE}={environ[SIZE]} inherited by Slurm task "
            f"{slurm[0]} of {slurm[1]}; tfdist sets Horovod up from Slurm.")


def with_horovodrun(cluster: Cluster, environ: Mapping[str, str]) -> Cluster:
    """`cluster`, carrying horovodrun's ranks where horovodrun started this process."""
    ranks = read(environ, cluster)
    return cluster if ranks is None else dataclasses.replace(cluster, horovodrun=ranks)


def _horovodrun_variables(environ: Mapping[str, str]) -> bool:
    if environ.get(OWNED) == "1" or LocalLaunchEnv.is_present(environ):
        return False
    return all(name in environ for name in (RANK, SIZE, RENDEZVOUS))
