"""Where each size of a scaling study runs: its tasks, nodes and tasks per node (no TensorFlow).

A size is the number of training tasks (one replica each: a task per GPU, or per CPU node). Inside a
Slurm allocation of N nodes with K tasks per node, size s runs as one srun step of ceil(s / K)
nodes; parameter_server adds its chief and parameter servers to the workers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Optional, Union

from tfdist.cluster.errors import ClusterError
from tfdist.cluster.slurm import Allocation, in_step, read_allocation


@dataclasses.dataclass(frozen=True)
class Step:
    """One size of a study: `tasks` processes over `nodes` nodes, `tasks_per_node` at most."""

    size: int
    tasks: int
    nodes: int
    tasks_per_node: int

    @property
    def layout(self) -> str:
        """`2x4` (nodes x tasks per node), or `2x2+1` when the last node has fewer."""
        full, rest = divmod(self.tasks, self.tasks_per_node)
        if rest == 0:
            return f"{full}x{self.tasks_per_node}"
        return f"{full}x{self.tasks_per_node}+{rest}" if full else f"1x{rest}"


def allocation_from_env(environ: Mapping[str, str]) -> Optional[Allocation]:
    """The allocation of the batch script we run in (tfdist.cluster.slurm), or None outside
    Slurm."""
    if in_step(environ):
        raise ClusterError(
            "tfdist scale runs in an srun step (SLURM_STEP_ID is set), but it starts one srun "
            "step per size itself: run it in the batch script without srun (jobs/scale.sbatch "
            "does).")
    return read_allocation(environ)


def tasks_for(strategy: str, size: int, num_ps: int = 1) -> int:
    """Processes that size `size` needs: one per worker, plus chief and ps for parameter_server."""
    return size + 1 + num_ps if strategy == "parameter_server" else size


def plan_steps(strategy: str,
               sizes: list[int],
               allocation: Optional[Allocation],
               tasks_per_node: Optional[int] = None,
               num_ps: int = 1) -> list[Union[Step, str]]:
    """A Step per size, or the reason (a sentence) why that size cannot run in this allocation.
    Without an allocation (one machine) every size is one node."""
    plan: list[Union[Step, str]] = []
    for size in sizes:
        tasks = tasks_for(strategy, size, num_ps)
        if allocation is None:
            plan.append(Step(size, tasks, 1, tasks))
            continue
        per_node = tasks_per_node or allocation.tasks_per_node
        nodes = math.ceil(tasks / per_node)
        if nodes > allocation.nodes:
            plan.append(f"size {size} needs {tasks} tasks = {nodes} nodes of {per_node}, but job "
                        f"{allocation.job_id} has {allocation.nodes} node(s): submit with "
                        f"--nodes={nodes} (or more --ntasks-per-node), or drop size {size}.")
            continue
        plan.append(Step(size, tasks, nodes, min(tasks, per_node)))
    return plan


def default_sizes(allocation: Optional[Allocation],
                  strategy: str,
                  tasks_per_node: Optional[int] = None,
                  num_ps: int = 1) -> list[int]:
    """1, 2, 4, ... up to what the allocation holds, and the whole allocation."""
    if allocation is None:
        raise ClusterError("Outside a Slurm job tfdist scale cannot guess the sizes: give them, "
                           "e.g. --sizes=1,2.")
    total = allocation.nodes * (tasks_per_node or allocation.tasks_per_node)
    largest = total - tasks_for(strategy, 0, num_ps)
    if largest < 1:
        raise ClusterError(f"Job {allocation.job_id} has {total} task slot(s): too few for "
                           f"--strategy={strategy} (it needs {tasks_for(strategy, 1, num_ps)} "
                           "for one worker). Submit with more --nodes or --ntasks-per-node.")
    sizes = [2**i for i in range(int(math.log2(largest)) + 1)]
    return sizes if sizes[-1] == largest else sizes + [largest]


def srun_command(step: Step, allocation: Allocation) -> list[str]:
    """The srun options that run `step` inside `allocation` (block distribution: tfdist's roles
    follow it)."""
    cmd = [
        "srun", "--kill-on-bad-exit=1", "--label", f"--nodes={step.nodes}",
        f"--ntasks={step.tasks}", f"--ntasks-per-node={step.tasks_per_node}", "--distribution=block"
    ]
    if allocation.cpus_per_task:
        # srun of Slurm 22.05+ no longer inherits the batch job's --cpus-per-task.
        cmd.append(f"--cpus-per-task={allocation.cpus_per_task}")
    return cmd
