"""One machine: the processes `tfdist launch` starts, or a plain single process."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from tfdist import env_vars
from tfdist.cluster.base import Cluster, ClusterEnv, env_int
from tfdist.cluster.errors import ClusterError
from tfdist.cluster.launcher_choice import LAUNCH, choice_environ

RANK = env_vars.LAUNCH_RANK.name
WORLD_SIZE = env_vars.LAUNCH_WORLD_SIZE.name
PORT = env_vars.LAUNCH_PORT.name
HOST = "localhost"


def launch_environ(rank: int,
                   world_size: int,
                   port_base: int,
                   strategy: Optional[str] = None,
                   num_ps: Optional[int] = None,
                   evaluator: Optional[bool] = None) -> dict[str, str]:
    """The variables `tfdist launch` gives process `rank`; LocalLaunchEnv reads them back, and
    detect() the strategy (tfdist.cluster.launcher_choice)."""
    env = {RANK: str(rank), WORLD_SIZE: str(world_size), PORT: str(port_base)}
    env.update(choice_environ(strategy, LAUNCH, num_ps, evaluator))
    return env


class LocalLaunchEnv(ClusterEnv):
    name = "local"

    @classmethod
    def is_present(cls, environ: Mapping[str, str]) -> bool:
        return RANK in environ

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> Cluster:
        rank, world_size = env_int(environ, RANK), env_int(environ, WORLD_SIZE)
        if not 0 <= rank < world_size:
            raise ClusterError(f"{RANK}={rank} is out of range for {WORLD_SIZE}={world_size}: "
                               f"expected 0..{world_size - 1}. Start processes with tfdist launch.")
        port = env_int(environ, PORT) if environ.get(PORT) else None
        return Cluster("local", rank, world_size, (HOST, ) * world_size, port_base=port)


def single_process(other_launcher: Optional[str] = None) -> Cluster:
    """Nothing detected: one process, rank 0 of 1 (`other_launcher`: see Cluster)."""
    return Cluster("local", 0, 1, (HOST, ), other_launcher=other_launcher)
