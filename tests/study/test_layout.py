"""Sizes of a scaling study onto a Slurm allocation (fake environments: pure functions)."""

import pytest

from tfdist.cluster import ClusterError
from tfdist.study.layout import (Allocation, Step, allocation_from_env, default_sizes, plan_steps,
                                 srun_command)


def batch_env(**extra):
    env = {
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_NODELIST": "gpu[01-04]",
        "SLURM_TASKS_PER_NODE": "4(x4)"
    }
    env.update(extra)
    return env


def test_allocation_from_the_batch_script_environment():
    assert allocation_from_env(batch_env()) == Allocation("77", 4, 4, None)
    a = allocation_from_env(
        batch_env(SLURM_JOB_NUM_NODES="4", SLURM_NTASKS_PER_NODE="2", SLURM_CPUS_PER_TASK="8"))
    assert a == Allocation("77", 4, 2, 8)
    # Uneven nodes: every node holds at least the smallest count.
    assert allocation_from_env(batch_env(SLURM_TASKS_PER_NODE="4(x3),2")).tasks_per_node == 2
    assert allocation_from_env({}) is None


def test_inside_an_srun_step_is_refused():
    with pytest.raises(ClusterError, match="without srun"):
        allocation_from_env(batch_env(SLURM_STEP_ID="0"))


def test_sizes_fill_nodes_in_order():
    steps = plan_steps("horovod", [1, 2, 4, 8, 16], Allocation("77", 4, 4))
    assert steps == [
        Step(1, 1, 1, 1),
        Step(2, 2, 1, 2),
        Step(4, 4, 1, 4),
        Step(8, 8, 2, 4),
        Step(16, 16, 4, 4)
    ]
    assert [s.layout for s in steps] == ["1x1", "1x2", "1x4", "2x4", "4x4"]
    too_big = plan_steps("horovod", [32], Allocation("77", 4, 4))[0]
    assert isinstance(too_big, str) and "--nodes=8" in too_big and "size 32" in too_big


def test_one_task_per_node_and_parameter_server_extra_tasks():
    assert plan_steps("multi_worker", [2], Allocation("5", 2, 1)) == [Step(2, 2, 2, 1)]
    # parameter_server: 2 workers + chief + 1 ps = 4 tasks, 2 per node.
    (ps, ) = plan_steps("parameter_server", [2], Allocation("5", 2, 2))
    assert (ps.tasks, ps.nodes, ps.layout) == (4, 2, "2x2")
    (odd, ) = plan_steps("parameter_server", [1], Allocation("5", 2, 2))
    assert (odd.tasks, odd.nodes, odd.layout) == (3, 2, "1x2+1")
    # On one machine every size is one node.
    assert plan_steps("multi_worker", [3], None) == [Step(3, 3, 1, 3)]


def test_default_sizes_are_powers_of_two_and_the_whole_allocation():
    assert default_sizes(Allocation("1", 3, 2), "multi_worker") == [1, 2, 4, 6]
    assert default_sizes(Allocation("1", 2, 1), "horovod") == [1, 2]
    assert default_sizes(Allocation("1", 2, 2), "parameter_server") == [1, 2]
    with pytest.raises(ClusterError, match="--sizes=1,2"):
        default_sizes(None, "multi_worker")


def test_srun_command_of_a_step():
    cmd = srun_command(Step(8, 8, 2, 4), Allocation("77", 4, 4, cpus_per_task=8))
    assert cmd[:2] == ["srun", "--kill-on-bad-exit=1"]
    assert {
        "--nodes=2", "--ntasks=8", "--ntasks-per-node=4", "--distribution=block",
        "--cpus-per-task=8"
    } <= set(cmd)
    assert not any(
        a.startswith("--cpus") for a in srun_command(Step(1, 1, 1, 1), Allocation("77", 4, 4)))
