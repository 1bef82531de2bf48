"""Slurm environments as srun set them on the test cluster (Slurm 22.05), faked for the parser."""

import pytest

from tfdist.cluster import ClusterError, detect


def step(procid, nodename, nodelist="node[1-2]", ntasks=4, tpn="2(x2)", **extra):
    env = {
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_NTASKS": str(ntasks),
        "SLURM_TASKS_PER_NODE": tpn,
        "SLURM_STEP_ID": "0",
        "SLURM_STEP_NODELIST": nodelist,
        "SLURM_STEP_NUM_TASKS": str(ntasks),
        "SLURM_STEP_TASKS_PER_NODE": tpn,
        "SLURM_PROCID": str(procid),
        "SLURMD_NODENAME": nodename,
    }
    env.update({k: str(v) for k, v in extra.items()})
    return env


def test_one_node_several_tasks():
    c = detect(step(2, "gpu07", nodelist="gpu07", ntasks=4, tpn="4", SLURM_LOCALID=2))
    assert (c.environment, c.rank, c.world_size) == ("slurm", 2, 4)
    assert (c.local_rank, c.local_world_size, c.node_rank) == (2, 4, 0)
    assert c.nodes == ("gpu07", ) and c.job_id == "4242"


@pytest.mark.parametrize("rank,host,local_rank,node_rank", [
    (0, "node1", 0, 0),
    (1, "node1", 1, 0),
    (2, "node2", 0, 1),
    (3, "node2", 1, 1),
])
def test_block_distribution_two_nodes(rank, host, local_rank, node_rank):
    c = detect(step(rank, host, SLURM_LOCALID=local_rank))
    assert c.task_hosts == ("node1", "node1", "node2", "node2")
    assert (c.rank, c.local_rank, c.local_world_size, c.node_rank) == (rank, local_rank, 2,
                                                                       node_rank)
    assert c.nodes == ("node1", "node2")


@pytest.mark.parametrize("rank,host,local_rank", [(0, "node1", 0), (1, "node2", 0), (2, "node1", 1),
                                                  (3, "node2", 1)])
def test_cyclic_distribution(rank, host, local_rank):
    c = detect(step(rank, host, SLURM_LOCALID=local_rank, SLURM_DISTRIBUTION="cyclic"))
    assert c.task_hosts == ("node1", "node2", "node1", "node2")
    assert (c.local_rank, c.node_rank) == (local_rank, int(host[-1]) - 1)


def test_cyclic_uneven():
    # srun -N2 -n3 --distribution=cyclic: node1 gets ranks 0 and 2.
    c = detect(step(2, "node1", ntasks=3, tpn="2,1", SLURM_DISTRIBUTION="cyclic:block"))
    assert c.task_hosts == ("node1", "node2", "node1")
    assert (c.local_rank, c.local_world_size) == (1, 2)


def test_uneven_block_keeps_zero_padding():
    env = step(5, "o010", nodelist="n[0001-0002],o[009-010]", ntasks=6, tpn="2(x2),1(x2)")
    c = detect(env)
    assert c.task_hosts == ("n0001", "n0001", "n0002", "n0002", "o009", "o010")
    assert c.nodes == ("n0001", "n0002", "o009", "o010")
    assert (c.node_rank, c.local_rank, c.local_world_size) == (3, 0, 1)


def test_one_node_reports_cyclic_harmlessly():
    # Seen on Slurm 22.05: `srun -N1 -n1` reported SLURM_DISTRIBUTION=cyclic.
    c = detect(step(0, "node1", nodelist="node1", ntasks=1, tpn="1", SLURM_DISTRIBUTION="cyclic"))
    assert (c.rank, c.world_size) == (0, 1)


def test_step_variables_win_over_job_variables():
    # A step over a subset of the allocation: srun -N1 -n2 inside a 2-node job.
    env = step(1, "node2", nodelist="node[1-2]", ntasks=4, tpn="2(x2)")
    env.update(SLURM_STEP_NODELIST="node2", SLURM_STEP_NUM_TASKS="2", SLURM_STEP_TASKS_PER_NODE="2")
    c = detect(env)
    assert (c.world_size, c.nodes, c.local_rank) == (2, ("node2", ), 1)


def test_job_variables_are_the_fallback():
    env = step(1, "node1", nodelist="node1", ntasks=2, tpn="2")
    for name in ("SLURM_STEP_NODELIST", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_TASKS_PER_NODE"):
        del env[name]
    c = detect(env)
    assert (c.rank, c.world_size, c.nodes) == (1, 2, ("node1", ))


def test_ntasks_per_node_when_no_layout_string():
    env = step(3, "node2", SLURM_NTASKS_PER_NODE=2)
    del env["SLURM_STEP_TASKS_PER_NODE"], env["SLURM_TASKS_PER_NODE"]
    assert detect(env).task_hosts == ("node1", "node1", "node2", "node2")


def test_batch_script_of_single_task_job_is_rank_zero():
    env = {
        "SLURM_JOB_ID": "7",
        "SLURM_JOB_NODELIST": "node1",
        "SLURM_NTASKS": "1",
        "SLURM_TASKS_PER_NODE": "1",
        "SLURM_PROCID": "0",
        "SLURMD_NODENAME": "node1"
    }
    c = detect(env)
    assert (c.environment, c.rank, c.world_size, c.nodes) == ("slurm", 0, 1, ("node1", ))


# --- errors: each names the value, what was expected, and what to change ---------------------


def test_outside_srun_in_multi_task_allocation():
    # Seen on Slurm 22.05: the batch script sees SLURM_PROCID=0 of SLURM_NTASKS=4, no SLURM_STEP_*.
    env = {
        "SLURM_JOB_ID": "7",
        "SLURM_JOB_NODELIST": "node[1-2]",
        "SLURM_NTASKS": "4",
        "SLURM_TASKS_PER_NODE": "2(x2)",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "0",
        "SLURMD_NODENAME": "node1"
    }
    with pytest.raises(ClusterError,
                       match=r"with 4 tasks on 2 node\(s\), but outside any srun "
                       r"step .*wait forever.*Start every task with srun"):
        detect(env)


def test_outside_srun_multi_node_without_ntasks():
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_TASKS_PER_NODE": "1(x2)"}
    with pytest.raises(ClusterError, match="with 2 tasks on 2 node.*srun"):
        detect(env)


def test_procid_out_of_range():
    with pytest.raises(ClusterError,
                       match=r"SLURM_PROCID=4 is out of range for a world size of "
                       r"4 \(SLURM_STEP_NUM_TASKS=4\): expected 0\.\.3"):
        detect(step(4, "node2"))


def test_world_size_not_sum_of_tasks_per_node():
    with pytest.raises(ClusterError,
                       match=r"SLURM_STEP_TASKS_PER_NODE=2\(x2\) adds up to 4 "
                       r"tasks, but the world size is 5.*--ntasks equal --nodes x "
                       r"--ntasks-per-node"):
        detect(step(0, "node1", ntasks=5))


def test_tasks_per_node_and_nodelist_disagree():
    with pytest.raises(ClusterError,
                       match=r"SLURM_STEP_TASKS_PER_NODE=2\(x3\) describes 3 "
                       r"node\(s\) but SLURM_STEP_NODELIST names 2 \(node1, node2\)"):
        detect(step(0, "node1", ntasks=6, tpn="2(x3)"))


def test_malformed_nodelist():
    with pytest.raises(ClusterError, match=r"Cannot parse SLURM_STEP_NODELIST 'node\[1-'"):
        detect(step(0, "node1", nodelist="node[1-"))


def test_malformed_tasks_per_node():
    with pytest.raises(ClusterError, match=r"Cannot parse SLURM_STEP_TASKS_PER_NODE '2\(x'"):
        detect(step(0, "node1", tpn="2(x"))


def test_non_integer_procid():
    with pytest.raises(ClusterError, match=r"SLURM_PROCID='abc' is not an integer"):
        detect(step("abc", "node1"))


def test_ambiguous_ntasks_without_ntasks_per_node():
    env = step(0, "node1", ntasks=3)
    del env["SLURM_STEP_TASKS_PER_NODE"], env["SLURM_TASKS_PER_NODE"]
    with pytest.raises(ClusterError,
                       match=r"3 tasks over 2 nodes .* ambiguous\. Give "
                       r"--ntasks-per-node instead of --ntasks"):
        detect(env)


@pytest.mark.parametrize("dist", ["plane", "plane=2", "arbitrary"])
def test_unsupported_distribution(dist):
    with pytest.raises(ClusterError,
                       match=rf"SLURM_DISTRIBUTION='{dist}' is not supported.*"
                       r"--distribution=block"):
        detect(step(0, "node1", SLURM_DISTRIBUTION=dist))


def test_task_not_on_the_node_the_mapping_says():
    # Rank 1 under block belongs on node1; Slurm says it runs on node2 (e.g. an unset plane dist).
    with pytest.raises(ClusterError,
                       match=r"Rank 1 should run on node1 .* but Slurm runs it on "
                       r"node2 \(SLURMD_NODENAME\)"):
        detect(step(1, "node2"))


def test_local_id_disagrees_with_layout():
    with pytest.raises(ClusterError, match=r"SLURM_LOCALID=0 but rank 1 is task 1 of 2 on node1"):
        detect(step(1, "node1", SLURM_LOCALID=0))


def test_the_allocation_is_read_from_the_job_variables():
    from tfdist.cluster.slurm import Allocation, in_step, read_allocation

    env = step(0, "node1", SLURM_CPUS_PER_TASK=8)  # a step of 2 nodes x 2 tasks
    assert in_step(env)
    assert read_allocation(env) == Allocation("4242", 2, 2, 8)
    batch = {k: v for k, v in env.items() if "STEP" not in k}
    assert not in_step(batch) and read_allocation(batch) == Allocation("4242", 2, 2, 8)
    assert read_allocation({}) is None and not in_step({"SLURM_STEP_ID": "0"})
    with pytest.raises(ClusterError, match="job 4242 sets neither SLURM_JOB_NUM_NODES"):
        read_allocation({"SLURM_JOB_ID": "4242"})
