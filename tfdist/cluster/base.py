"""What every cluster environment answers: who am I, and where is everybody."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Optional

from tfdist.cluster.errors import ClusterError


@dataclasses.dataclass(frozen=True)
class HorovodrunRanks:
    """What horovodrun told this process (read by tfdist.cluster.horovodrun)."""

    rank: int
    size: int
    local: Optional[tuple[int, int]] = None  # (local rank, local size), where it set both


@dataclasses.dataclass(frozen=True)
class Cluster:
    """This task's place in the job, as read from its environment."""

    environment: str  # the ClusterEnv's name: "slurm", "tf_config", "local", "openmpi", ...
    rank: int
    world_size: int
    task_hosts: tuple[str, ...]  # the host of every rank, in rank order
    job_id: Optional[str] = None  # the batch job's, or the launch's (mpirun's job id, ...)
    tf_config: Optional[dict[str, Any]] = None  # a TF_CONFIG the user gave, passed through
    port_base: Optional[int] = None  # a base port chosen by the launcher
    strategy: Optional[str] = None  # the strategy a launcher chose, used when asked for "auto"
    # A launcher tfdist does not read that started this process as one of several (its variables,
    # tfdist.cluster.other_launchers); set only on a single local process.
    other_launcher: Optional[str] = None
    # Who chose `strategy` ("jobs/horovod.sbatch", "tfdist launch"), and what it chose for
    # parameter_server: a script asking for something else is refused (launcher_choice).
    strategy_by: Optional[str] = None
    num_ps: Optional[int] = None
    evaluator: Optional[bool] = None
    # The ranks horovodrun gave this process, which Horovod takes as they are (the ones above stay
    # the environment's: tfdist.cluster.horovodrun).
    horovodrun: Optional[HorovodrunRanks] = None

    @property
    def nodes(self) -> tuple[str, ...]:
        """The hosts with at least one task, in order of first rank."""
        return tuple(dict.fromkeys(self.task_hosts))

    @property
    def host(self) -> str:
        return self.task_hosts[self.rank]

    @property
    def node_rank(self) -> int:
        return self.nodes.index(self.host)

    @property
    def local_rank(self) -> int:
        return self.local_rank_of(self.rank)

    @property
    def local_world_size(self) -> int:
        return self.task_hosts.count(self.host)

    def local_rank_of(self, rank: int) -> int:
        """The index of `rank` among the ranks that share its host."""
        return self.task_hosts[:rank].count(self.task_hosts[rank])

    def as_dict(self) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "rank": self.rank,
            "world_size": self.world_size,
            "local_rank": self.local_rank,
            "local_world_size": self.local_world_size,
            "node_rank": self.node_rank,
            "nodes": list(self.nodes),
            "job_id": self.job_id,
        } | ({
            "other_launcher": self.other_launcher
        } if self.other_launcher else {})


class ClusterEnv:
    """One kind of environment (Slurm, TF_CONFIG, a local launcher). Subclasses are stateless."""

    name: str = ""

    @classmethod
    def is_present(cls, environ: Mapping[str, str]) -> bool:
        """True when this environment describes the current process."""
        raise NotImplementedError

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> Cluster:
        """This task's Cluster; raises ClusterError when the environment is inconsistent."""
        raise NotImplementedError


def env_int(environ: Mapping[str, str], name: str, hint: str = "") -> int:
    """An integer environment variable, or a ClusterError that names it."""
    raw = environ.get(name)
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise ClusterError(f"{name}={raw!r} is not an integer. {hint}".strip()) from None


def first_of(environ: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    """(name, value) of the first of `names` that is set and not empty."""
    for name in names:
        if environ.get(name):
            return name, environ[name]
    return None
