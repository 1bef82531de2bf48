"""The roles of a strategy's tasks: the TF_CONFIG TensorFlow reads and Horovod's variables."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from tfdist.cluster.base import Cluster
from tfdist.cluster.errors import ClusterError
from tfdist.cluster.launcher_choice import conflict
from tfdist.cluster.ports import port_base, task_port
from tfdist.cluster.strategy_names import SINGLE_TASK, STRATEGIES


@dataclasses.dataclass(frozen=True)
class Roles:
    """What this task does under one strategy."""

    strategy: str  # the strategy asked for, with "auto" resolved where the task count decides
    task_type: Optional[str]  # "chief", "worker", "ps", "evaluator", or None for one task
    task_index: Optional[int]
    port: Optional[int]  # this task's server port (None when it runs no server)
    tf_config: Optional[dict[str, Any]]
    horovod: Optional[dict[str, str]]

    @property
    def trains(self) -> bool:
        """Whether this task runs model.fit: every task but parameter_server's ps, workers and
        evaluator (the chief drives the workers' steps)."""
        return self.strategy != "parameter_server" or self.task_type == "chief"

    @property
    def is_evaluator(self) -> bool:
        """parameter_server --evaluator: the task that evaluates the chief's checkpoints."""
        return self.task_type == "evaluator"


def resolve_strategy(strategy: str, cluster: Cluster) -> str:
    """Check the name; "auto" takes the launcher's choice (another name than the launcher's is a
    ClusterError naming both), else with several tasks becomes multi_worker (parameter_server
    when a user's TF_CONFIG has ps tasks). One task stays "auto": the engine then looks at the
    GPUs."""
    if strategy not in STRATEGIES:
        raise ClusterError(f"Unknown strategy {strategy!r}: expected one of {', '.join(STRATEGIES)}"
                           " (--strategy).")
    if cluster.strategy and strategy not in ("auto", cluster.strategy):
        raise conflict(cluster.strategy_by or "the launcher", "strategy", cluster.strategy,
                       strategy)
    if strategy == "auto" and cluster.strategy:
        return resolve_strategy(cluster.strategy, cluster)
    if strategy == "auto" and cluster.world_size > 1:
        has_ps = cluster.tf_config is not None and "ps" in cluster.tf_config["cluster"]
        return "parameter_server" if has_ps else "multi_worker"
    return strategy


def build_roles(cluster: Cluster,
                strategy: str = "auto",
                num_ps: Optional[int] = None,
                evaluator: Optional[bool] = None,
                port: Optional[int] = None) -> Roles:
    """Roles of this task; `port` overrides the base port (--port). `num_ps` and `evaluator`
    (parameter_server) not given: the launcher's (cluster.num_ps, .evaluator), else 1 and False;
    given, they must agree with the launcher's."""
    strategy = resolve_strategy(strategy, cluster)
    if strategy == "parameter_server":
        num_ps = _agreed(cluster, "num_ps", cluster.num_ps, num_ps, 1)
        evaluator = _agreed(cluster, "evaluator", cluster.evaluator, evaluator, False)
    num_ps, evaluator = 1 if num_ps is None else num_ps, bool(evaluator)
    if cluster.other_launcher:
        raise ClusterError(
            f"This process is one of several started by {cluster.other_launcher}, a launcher "
            f"whose ranks tfdist cannot place: under --strategy={strategy} each process would "
            "train the whole run alone, every one into the same model directory. Fix: start the "
            "processes with a launcher tfdist reads: `tfdist launch -n N -- COMMAND` (one "
            "machine), `srun` (Slurm), `mpirun`/`mpiexec` of Open MPI, MPICH, Intel MPI, MVAPICH "
            "or PALS, `flux run`, `jsrun`; or give each process its TF_CONFIG.")
    if strategy in SINGLE_TASK or (strategy == "auto" and cluster.world_size == 1):
        if cluster.world_size > 1:
            raise ClusterError(
                f"--strategy={strategy} runs in a single task, but this job has "
                f"{cluster.world_size} tasks. Use --strategy=multi_worker or horovod for several "
                f"tasks, or launch one task (Slurm: --ntasks=1, all GPUs of the node).")
        return Roles(strategy, None, None, None, None, None)

    base = port_base(cluster.job_id, override=port, launcher_base=cluster.port_base)
    ports = [task_port(base, cluster.local_rank_of(r)) for r in range(cluster.world_size)]
    if strategy == "horovod":
        return Roles(strategy, None, None, ports[0] if cluster.rank == 0 else None, None,
                     horovod_environ(cluster, ports[0]))

    if cluster.tf_config is not None:
        tf_config = _check_user_tf_config(cluster.tf_config, strategy)
    else:
        addrs = [f"{host}:{p}" for host, p in zip(cluster.task_hosts, ports)]
        if strategy == "multi_worker":
            types = ["worker"] * cluster.world_size
        else:
            types = parameter_server_types(cluster.world_size, num_ps, evaluator)
        spec: dict[str, list[str]] = {}
        for task_type, addr in zip(types, addrs):
            spec.setdefault(task_type, []).append(addr)
        me = types[cluster.rank]
        tf_config = {"cluster": spec, "task": {"type": me, "index": types[:cluster.rank].count(me)}}
    task = tf_config["task"]
    return Roles(strategy, task["type"], task["index"], ports[cluster.rank], tf_config, None)


def _agreed(cluster: Cluster, name: str, chosen: Any, asked: Any, default: Any) -> Any:
    """The value of `name` asked for, else the launcher's, else `default`."""
    if chosen is not None and asked is not None and asked != chosen:
        raise conflict(cluster.strategy_by or "the launcher", name, chosen, asked)
    return next((v for v in (asked, chosen) if v is not None), default)


def parameter_server_types(world_size: int, num_ps: int, evaluator: bool) -> list[str]:
    """Task 0 the chief, the next `num_ps` parameter servers, the rest workers (the last one the
    evaluator when asked)."""
    if num_ps < 1:
        raise ClusterError(f"--num_ps={num_ps}: parameter_server needs at least one ps task.")
    needed = 1 + num_ps + 1 + int(evaluator)
    if world_size < needed:
        roles = f"1 chief + {num_ps} ps + at least 1 worker" + (" + 1 evaluator"
                                                                if evaluator else "")
        raise ClusterError(
            f"--strategy=parameter_server with --num_ps={num_ps} needs at least {needed} tasks "
            f"({roles}), but the job has {world_size}. Launch {needed} or more tasks (Slurm: "
            f"--ntasks={needed}) or lower --num_ps.")
    workers = world_size - 1 - num_ps - int(evaluator)
    return ["chief"] + ["ps"] * num_ps + ["worker"] * workers + ["evaluator"] * int(evaluator)


def horovod_environ(cluster: Cluster, rendezvous_port: int) -> dict[str, str]:
    """Horovod's variables for this task, as horovodrun would set them, with rank 0's node serving
    the gloo rendezvous."""
    local_rank, local_size = cluster.local_rank, cluster.local_world_size
    # Horovod's "cross" communicator joins the tasks with the same local rank across nodes.
    cross_nodes = [n for n in cluster.nodes if cluster.task_hosts.count(n) > local_rank]
    return {
        "HOROVOD_RANK": str(cluster.rank),
        "HOROVOD_SIZE": str(cluster.world_size),
        "HOROVOD_LOCAL_RANK": str(local_rank),
        "HOROVOD_LOCAL_SIZE": str(local_size),
        "HOROVOD_CROSS_RANK": str(cross_nodes.index(cluster.host)),
        "HOROVOD_CROSS_SIZE": str(len(cross_nodes)),
        "HOROVOD_HOSTNAME": cluster.host,
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": cluster.task_hosts[0],
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(rendezvous_port),
    }


def _check_user_tf_config(tf_config: dict[str, Any], strategy: str) -> dict[str, Any]:
    has_ps = "ps" in tf_config["cluster"]
    if strategy == "parameter_server" and not has_ps:
        raise ClusterError(f"--strategy=parameter_server, but TF_CONFIG has no 'ps' tasks "
                           f"(cluster: {sorted(tf_config['cluster'])}). Add ps tasks to TF_CONFIG "
                           "or unset it to let tfdist assign the roles.")
    if strategy == "multi_worker" and has_ps:
        raise ClusterError(f"--strategy=multi_worker, but TF_CONFIG has 'ps' tasks (cluster: "
                           f"{sorted(tf_config['cluster'])}). Use --strategy=parameter_server, or "
                           "remove the ps tasks.")
    return tf_config
