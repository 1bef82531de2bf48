"""Slurm: roles from `SLURM_*`, step variables first (set by `srun`), job variables as fallback.
Reads the environment only; requeueing the job is tfdist.cluster.requeue's."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Optional

from tfdist import env_vars
from tfdist.cluster.base import Cluster, ClusterEnv, env_int, first_of
from tfdist.cluster.errors import ClusterError
from tfdist.cluster.hostlist import expand_hosts, expand_tasks_per_node

_JOB_ID = ("SLURM_JOB_ID", "SLURM_JOBID")
_STEP_ID = ("SLURM_STEP_ID", "SLURM_STEPID")
_NODELIST = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
_JOB_NODELIST = _NODELIST[1:]  # the allocation's (a step's may be fewer nodes)
_NUM_TASKS = ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")
_TASKS_PER_NODE = ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
_NTASKS_PER_NODE = "SLURM_NTASKS_PER_NODE"
_PROCID = "SLURM_PROCID"
_LOCALID = "SLURM_LOCALID"
_DISTRIBUTION = "SLURM_DISTRIBUTION"
_NODENAME = "SLURMD_NODENAME"

# Set by jobs/common.sh (REQUEUE=1, the default): on preemption, requeue the job.
REQUEUE_ENV = env_vars.REQUEUE.name

_SRUN_HINT = ("Start every task with srun inside the batch script, e.g. "
              "`srun --kill-on-bad-exit=1 tfdist train ...` (or use the scripts in jobs/).")


class SlurmEnv(ClusterEnv):
    name = "slurm"

    @classmethod
    def is_present(cls, environ: Mapping[str, str]) -> bool:
        return first_of(environ, _JOB_ID) is not None

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> Cluster:
        job_id = first_of(environ, _JOB_ID)[1]
        nodelist = first_of(environ, _NODELIST)
        if nodelist is None:
            raise ClusterError(f"Slurm job {job_id} sets none of {', '.join(_NODELIST)}; "
                               "cannot tell which nodes the job runs on. " + _SRUN_HINT)
        nodes = expand_hosts(nodelist[1], source=nodelist[0])

        if first_of(environ, _STEP_ID) is None:
            return _outside_step(environ, job_id, nodes)

        num_tasks = first_of(environ, _NUM_TASKS)
        if num_tasks is None:
            raise ClusterError(
                f"Slurm step of job {job_id} sets none of {', '.join(_NUM_TASKS)}. " + _SRUN_HINT)
        world_size = env_int(environ, num_tasks[0])
        tasks_per_node = _tasks_per_node(environ, nodes, world_size, nodelist[0])

        rank = env_int(environ, _PROCID, _SRUN_HINT)
        if not 0 <= rank < world_size:
            raise ClusterError(
                f"{_PROCID}={rank} is out of range for a world size of {world_size} "
                f"({num_tasks[0]}={world_size}): expected 0..{world_size - 1}. Check that "
                f"{_PROCID} and {num_tasks[0]} come from the same srun step.")

        task_hosts = _place_tasks(nodes, tasks_per_node, environ.get(_DISTRIBUTION, ""))
        _check_own_node(environ, rank, task_hosts, nodelist)
        cluster = Cluster("slurm", rank, world_size, tuple(task_hosts), job_id=job_id)
        _check_local_id(environ, cluster)
        return cluster


@dataclasses.dataclass(frozen=True)
class Allocation:
    """A Slurm job's allocation as its batch script sees it, outside any srun step (`tfdist scale`
    starts an srun step per size in it)."""

    job_id: str
    nodes: int
    tasks_per_node: int  # the fewest any node has: every node can hold this many
    cpus_per_task: Optional[int] = None


def in_step(environ: Mapping[str, str]) -> bool:
    """Whether this process runs in an srun step of a Slurm job."""
    return first_of(environ, _JOB_ID) is not None and first_of(environ, _STEP_ID) is not None


def read_allocation(environ: Mapping[str, str]) -> Optional[Allocation]:
    """The allocation of the Slurm job this process runs in (its job variables), None outside
    Slurm."""
    job = first_of(environ, _JOB_ID)
    if job is None:
        return None
    nodelist = first_of(environ, _JOB_NODELIST)
    if environ.get("SLURM_JOB_NUM_NODES", "").isdigit():
        nodes = int(environ["SLURM_JOB_NUM_NODES"])
    elif nodelist:
        nodes = len(expand_hosts(nodelist[1], source=nodelist[0]))
    else:
        raise ClusterError(f"Slurm job {job[1]} sets neither SLURM_JOB_NUM_NODES nor "
                           "SLURM_JOB_NODELIST: cannot tell how many nodes it has.")
    job_tasks_per_node = _TASKS_PER_NODE[-1]
    if environ.get(_NTASKS_PER_NODE, "").isdigit():
        per_node = int(environ[_NTASKS_PER_NODE])
    elif environ.get(job_tasks_per_node):
        per_node = min(expand_tasks_per_node(environ[job_tasks_per_node],
                                             source=job_tasks_per_node))
    else:
        per_node = 1
    cpus = environ.get("SLURM_CPUS_PER_TASK", "")
    return Allocation(job[1], nodes, per_node, int(cpus) if cpus.isdigit() else None)


def _outside_step(environ: Mapping[str, str], job_id: str, nodes: list[str]) -> Cluster:
    """The batch script itself (no srun step): fine for one task, a silent hang for more."""
    counts = first_of(environ, _TASKS_PER_NODE)
    ntasks = int(environ["SLURM_NTASKS"]) if environ.get("SLURM_NTASKS", "").isdigit() else None
    if ntasks is None and counts is not None:
        ntasks = sum(expand_tasks_per_node(counts[1], source=counts[0]))
    if (ntasks or 1) > 1 or len(nodes) > 1:
        raise ClusterError(
            f"This process runs in Slurm job {job_id} with {ntasks or 'several'} tasks on "
            f"{len(nodes)} node(s), but outside any srun step (no SLURM_STEP_* variables): it "
            f"would act as rank 0 and wait forever for the others. " + _SRUN_HINT)
    host = environ.get(_NODENAME) or nodes[0]
    return Cluster("slurm", 0, 1, (host, ), job_id=job_id)


def _tasks_per_node(environ: Mapping[str, str], nodes: list[str], world_size: int,
                    nodelist_var: str) -> list[int]:
    spec = first_of(environ, _TASKS_PER_NODE)
    if spec is not None:
        counts = expand_tasks_per_node(spec[1], source=spec[0])
        source = f"{spec[0]}={spec[1]}"
    elif environ.get(_NTASKS_PER_NODE):
        counts = [env_int(environ, _NTASKS_PER_NODE)] * len(nodes)
        source = f"{_NTASKS_PER_NODE}={environ[_NTASKS_PER_NODE]}"
    elif len(nodes) == 1:
        return [world_size]
    else:
        raise ClusterError(
            f"{world_size} tasks over {len(nodes)} nodes ({nodelist_var}) without a "
            f"tasks-per-node layout ({', '.join(_TASKS_PER_NODE)} and {_NTASKS_PER_NODE} are "
            f"unset): which task runs on which node is ambiguous. Give --ntasks-per-node "
            f"instead of --ntasks (e.g. --nodes={len(nodes)} "
            f"--ntasks-per-node={max(1, world_size // len(nodes))}).")
    if len(counts) != len(nodes):
        raise ClusterError(
            f"{source} describes {len(counts)} node(s) but {nodelist_var} names {len(nodes)} "
            f"({', '.join(nodes)}). Check that both come from the same srun step.")
    if sum(counts) != world_size:
        raise ClusterError(
            f"{source} adds up to {sum(counts)} tasks, but the world size is {world_size}. "
            f"Make --ntasks equal --nodes x --ntasks-per-node.")
    return counts


def _place_tasks(nodes: list[str], counts: list[int], distribution: str) -> list[str]:
    """The host of every rank, following srun's task distribution across nodes."""
    # Only the first level (nodes) matters: "block:cyclic,Pack" places tasks on nodes in blocks.
    kind = distribution.split(",")[0].split(":")[0].strip().lower()
    if kind in ("", "block", "*") or len(nodes) == 1:
        return [host for host, n in zip(nodes, counts) for _ in range(n)]
    if kind == "cyclic":
        hosts, left = [], list(counts)
        while any(left):
            for i, host in enumerate(nodes):
                if left[i]:
                    hosts.append(host)
                    left[i] -= 1
        return hosts
    raise ClusterError(
        f"{_DISTRIBUTION}={distribution!r} is not supported: tfdist can tell which node runs "
        f"which rank only for block (the default) and cyclic distributions. Launch with "
        f"`srun --distribution=block` (or cyclic).")


def _check_own_node(environ, rank: int, task_hosts: list[str], nodelist) -> None:
    actual = environ.get(_NODENAME)
    if actual and actual != task_hosts[rank]:
        raise ClusterError(
            f"Rank {rank} should run on {task_hosts[rank]} according to {nodelist[0]}="
            f"{nodelist[1]} and the tasks per node, but Slurm runs it on {actual} "
            f"({_NODENAME}). The task layout is not what tfdist expects; launch with "
            f"`srun --distribution=block` and --ntasks-per-node.")


def _check_local_id(environ: Mapping[str, str], cluster: Cluster) -> None:
    if environ.get(_LOCALID, "") == "":
        return
    local_id = env_int(environ, _LOCALID)
    if local_id != cluster.local_rank:
        raise ClusterError(
            f"{_LOCALID}={local_id} but rank {cluster.rank} is task {cluster.local_rank} of "
            f"{cluster.local_world_size} on {cluster.host}; the task layout is not what tfdist "
            f"expects. Launch with `srun --distribution=block` and --ntasks-per-node.")


def job_id(environ: Mapping[str, str]) -> Optional[str]:
    """This process's Slurm job id, None outside a Slurm job."""
    found = first_of(environ, _JOB_ID)
    return None if found is None else found[1]


def requeue_wanted(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether the job asked to be requeued when preempted ($TFDIST_REQUEUE=1)."""
    environ = os.environ if environ is None else environ
    return environ.get(REQUEUE_ENV, "0") == "1"
