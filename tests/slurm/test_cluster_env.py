"""The cluster layer on a real Slurm (issue 2's claims, shown with sbatch + srun on the two-node
test cluster): what `tfdist env` says in every task, for each layout and strategy."""

from __future__ import annotations

import socket

import pytest

from tests.slurm.conftest import PROBES, PYTHON, TFDIST

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

N1, N2 = "tfdist-node1", "tfdist-node2"


def run_env_job(slurm, jobdir, sbatch_args, srun_args="", env_args="", setup=""):
    """One batch job whose srun step runs `tfdist env --format=json` (via the probe) in every task;
    returns the finished job and the task records, in rank order."""
    script = (f"{setup}srun --kill-on-bad-exit=1 {srun_args} "
              f"{PYTHON} {PROBES / 'task_env.py'} {jobdir} {env_args}\n")
    job = slurm.sbatch(script, *sbatch_args, workdir=jobdir)
    return job, job.json_files("task-*.json")


def check_tasks(job, tasks, world_size):
    assert job.state == "COMPLETED", job.describe()
    assert [t["procid"] for t in tasks] == list(range(world_size)), job.describe()
    for t in tasks:
        assert t["returncode"] == 0, t["stderr"]
        env = t["env"]
        assert env["environment"] == "slurm"
        assert env["rank"] == t["procid"]
        assert env["world_size"] == world_size
        assert env["job_id"] == job.job_id
        assert env["nodes"] == [N1, N2]
        # The node tfdist assigns to this rank is the node Slurm ran it on (each node namespace
        # has its own host name, as on a real cluster).
        assert env["nodes"][env["node_rank"]] == t["slurmd_nodename"] == t["hostname"]
    return [t["env"] for t in tasks]


def host_port(address):
    host, port = address.rsplit(":", 1)
    return host, int(port)


def check_own_address(tasks, addresses):
    """Each task's own address is on its own node: the name is Slurm's name for the node the task
    runs on, and it resolves to an address of the task's own network namespace."""
    for t, address in zip(tasks, addresses):
        host, port = host_port(address)
        assert host == t["slurmd_nodename"], (t["procid"], address)
        assert socket.gethostbyname(host) in t["addresses"], (t["procid"], address, t["addresses"])
        assert port == t["env"]["port"]


def test_block_two_nodes_two_tasks_each(slurm, jobdir):
    job, tasks = run_env_job(slurm,
                             jobdir, ["--nodes=2", "--ntasks-per-node=2"],
                             env_args="--strategy=multi_worker")
    envs = check_tasks(job, tasks, 4)
    assert [t["slurmd_nodename"] for t in tasks] == [N1, N1, N2, N2]
    assert [e["local_rank"] for e in envs] == [0, 1, 0, 1]
    assert [e["local_world_size"] for e in envs] == [2, 2, 2, 2]
    assert [e["node_rank"] for e in envs] == [0, 0, 1, 1]
    # Slurm 22.05 under srun: step variables present, block distribution.
    assert all(t["slurm"]["SLURM_STEP_TASKS_PER_NODE"] == "2(x2)" for t in tasks)
    assert all(t["slurm"]["SLURM_STEP_NODELIST"] == "tfdist-node[1-2]" for t in tasks)

    clusters = [e["tf_config"]["cluster"] for e in envs]
    assert all(c == clusters[0] for c in clusters), clusters
    workers = clusters[0]["worker"]
    assert [host_port(w)[0] for w in workers] == [N1, N1, N2, N2]
    base = host_port(workers[0])[1]
    assert [host_port(w)[1] for w in workers] == [base, base + 1, base, base + 1]
    assert [(e["tf_config"]["task"]["type"], e["tf_config"]["task"]["index"])
            for e in envs] == [("worker", r) for r in range(4)]
    check_own_address(tasks, workers)


def test_cyclic_distribution(slurm, jobdir):
    job, tasks = run_env_job(slurm,
                             jobdir, ["--nodes=2", "--ntasks-per-node=2"],
                             srun_args="--distribution=cyclic",
                             env_args="--strategy=multi_worker")
    envs = check_tasks(job, tasks, 4)
    assert all(t["slurm"].get("SLURM_DISTRIBUTION") == "cyclic" for t in tasks)
    assert [t["slurmd_nodename"] for t in tasks] == [N1, N2, N1, N2]
    assert [e["local_rank"] for e in envs] == [0, 0, 1, 1]
    assert [e["node_rank"] for e in envs] == [0, 1, 0, 1]
    workers = envs[0]["tf_config"]["cluster"]["worker"]
    assert all(e["tf_config"]["cluster"]["worker"] == workers for e in envs)
    base = host_port(workers[0])[1]
    assert workers == [f"{N1}:{base}", f"{N2}:{base}", f"{N1}:{base + 1}", f"{N2}:{base + 1}"]
    check_own_address(tasks, workers)


def test_uneven_three_tasks_on_two_nodes(slurm, jobdir):
    job, tasks = run_env_job(slurm,
                             jobdir, ["--nodes=2", "--ntasks=3"],
                             env_args="--strategy=multi_worker")
    envs = check_tasks(job, tasks, 3)
    assert all(t["slurm"]["SLURM_STEP_TASKS_PER_NODE"] == "2,1" for t in tasks)
    assert [t["slurmd_nodename"] for t in tasks] == [N1, N1, N2]
    assert [e["local_rank"] for e in envs] == [0, 1, 0]
    assert [e["local_world_size"] for e in envs] == [2, 2, 1]
    assert [e["node_rank"] for e in envs] == [0, 0, 1]
    workers = envs[0]["tf_config"]["cluster"]["worker"]
    assert all(e["tf_config"]["cluster"]["worker"] == workers for e in envs)
    assert [host_port(w)[0] for w in workers] == [N1, N1, N2]
    check_own_address(tasks, workers)


def test_horovod_variables(slurm, jobdir):
    job, tasks = run_env_job(slurm,
                             jobdir, ["--nodes=2", "--ntasks-per-node=2"],
                             env_args="--strategy=horovod")
    envs = check_tasks(job, tasks, 4)
    hvd = [e["horovod"] for e in envs]
    assert all(e["tf_config"] is None for e in envs)
    assert [h["HOROVOD_RANK"] for h in hvd] == ["0", "1", "2", "3"]
    assert {h["HOROVOD_SIZE"] for h in hvd} == {"4"}
    assert [h["HOROVOD_LOCAL_RANK"] for h in hvd] == ["0", "1", "0", "1"]
    assert {h["HOROVOD_LOCAL_SIZE"] for h in hvd} == {"2"}
    # The cross communicator joins the tasks with the same local rank: one per node.
    assert [h["HOROVOD_CROSS_RANK"] for h in hvd] == ["0", "0", "1", "1"]
    assert {h["HOROVOD_CROSS_SIZE"] for h in hvd} == {"2"}
    assert [h["HOROVOD_HOSTNAME"] for h in hvd] == [t["slurmd_nodename"] for t in tasks]
    assert {h["HOROVOD_CONTROLLER"] for h in hvd} == {"gloo"}
    # One rendezvous for all: on rank 0's node, reachable from every node.
    assert {h["HOROVOD_GLOO_RENDEZVOUS_ADDR"] for h in hvd} == {N1}
    assert len({h["HOROVOD_GLOO_RENDEZVOUS_PORT"] for h in hvd}) == 1
    assert socket.gethostbyname(hvd[0]["HOROVOD_GLOO_RENDEZVOUS_ADDR"]) in tasks[0]["addresses"]


def test_parameter_server_roles(slurm, jobdir):
    job, tasks = run_env_job(slurm,
                             jobdir, ["--nodes=2", "--ntasks-per-node=2"],
                             env_args="--strategy=parameter_server --num_ps=1")
    envs = check_tasks(job, tasks, 4)
    assert [(e["task_type"], e["task_index"]) for e in envs] == [("chief", 0), ("ps", 0),
                                                                 ("worker", 0), ("worker", 1)]
    assert [(e["tf_config"]["task"]["type"], e["tf_config"]["task"]["index"])
            for e in envs] == [("chief", 0), ("ps", 0), ("worker", 0), ("worker", 1)]
    cluster = envs[0]["tf_config"]["cluster"]
    assert all(e["tf_config"]["cluster"] == cluster for e in envs)
    assert sorted(cluster) == ["chief", "ps", "worker"]
    own = [cluster[e["task_type"]][e["task_index"]] for e in envs]
    assert [host_port(a)[0] for a in own] == [N1, N1, N2, N2]
    check_own_address(tasks, own)


def test_parameter_server_too_few_tasks_fails_in_every_task(slurm, jobdir):
    job, tasks = run_env_job(slurm,
                             jobdir, ["--nodes=2", "--ntasks-per-node=1"],
                             env_args="--strategy=parameter_server --num_ps=1")
    assert job.state == "FAILED" and job.exit_code != 0, job.describe()
    assert len(tasks) >= 1, job.describe()
    for t in tasks:
        assert t["returncode"] != 0
        assert "needs at least 3 tasks" in t["stderr"], t["stderr"]
    assert "needs at least 3 tasks" in job.log


def test_env_outside_srun_in_multi_task_allocation_fails_with_srun_hint(slurm, jobdir):
    script = f"{TFDIST} env --format=json --strategy=multi_worker\necho exit=$?\n"
    job = slurm.sbatch(script, "--nodes=2", "--ntasks-per-node=2", workdir=jobdir)
    log = job.log
    assert "exit=2" in log, job.describe()
    assert "outside any srun step" in log and "srun" in log, job.describe()
    assert '"rank"' not in log  # no JSON: it must not pretend to be rank 0 of 4


def test_env_outside_srun_in_single_task_allocation_is_fine(slurm, jobdir):
    script = f"{TFDIST} env --format=json --strategy=multi_worker\n"
    job = slurm.sbatch(script, "--nodes=1", "--ntasks=1", workdir=jobdir)
    assert job.state == "COMPLETED", job.describe()
    assert '"world_size": 1' in job.log, job.describe()


def test_shell_format_is_evaluable_in_every_task(slurm, jobdir):
    script = ("srun bash -c 'eval \"$(" + str(TFDIST) + " env --format=shell "
              "--strategy=multi_worker)\" && echo \"$SLURM_PROCID $SLURMD_NODENAME $TF_CONFIG\"'\n")
    job = slurm.sbatch(script, "--nodes=2", "--ntasks-per-node=1", workdir=jobdir)
    assert job.state == "COMPLETED", job.describe()
    lines = sorted(line for line in job.log.splitlines() if line[:1].isdigit())
    assert [line.split()[:2] for line in lines] == [["0", N1], ["1", N2]], job.describe()
    assert all('"worker": ["tfdist-node1:' in line for line in lines), job.describe()


def test_tcp_between_tasks_on_both_nodes(slurm, jobdir):
    script = f"srun --kill-on-bad-exit=1 {PYTHON} {PROBES / 'tcp_mesh.py'} {jobdir}\n"
    job = slurm.sbatch(script, "--nodes=2", "--ntasks-per-node=2", workdir=jobdir)
    records = job.json_files("tcp-*.json")
    assert job.state == "COMPLETED", job.describe() + "\n" + str(records)
    assert [r["rank"] for r in records] == [0, 1, 2, 3]
    node_of = {r["rank"]: r["node"] for r in records}
    assert [node_of[r] for r in range(4)] == [N1, N1, N2, N2]
    for r in records:
        assert r["errors"] == []
        assert r["bound"][0] == slurm.node_addrs[r["node"]]
        assert [a["from_rank"] for a in r["accepted"]] == [x for x in range(4) if x != r["rank"]]
        for a in r["accepted"]:
            # The source address is the peer's own node address: across nodes the bytes went
            # over the bridge between the two namespaces, not over loopback.
            assert a["from_node"] == node_of[a["from_rank"]]
            assert a["peer_ip"] == slurm.node_addrs[a["from_node"]], (r["rank"], a)
        assert [c["reply"][1]
                for c in r["connected"]] == [str(x) for x in range(4) if x != r["rank"]]
        # The controller answers from inside every node's namespace.
        assert r["scontrol_rc"] == 0 and r["scontrol_state"] == ["JobState=RUNNING"]


def test_step_smaller_than_the_allocation_uses_the_step(slurm, jobdir):
    # A 4-task allocation, a 2-task step: the step's variables win over the job's.
    job, tasks = run_env_job(slurm,
                             jobdir, ["--nodes=2", "--ntasks-per-node=2"],
                             srun_args="--ntasks=2 --ntasks-per-node=1",
                             env_args="--strategy=multi_worker")
    envs = check_tasks(job, tasks, 2)
    assert all(t["slurm"]["SLURM_NTASKS"] == "2" for t in tasks)
    assert all(t["slurm"]["SLURM_STEP_TASKS_PER_NODE"] == "1(x2)" for t in tasks)
    assert [t["slurmd_nodename"] for t in tasks] == [N1, N2]
    assert [e["local_world_size"] for e in envs] == [1, 1]
    check_own_address(tasks, envs[0]["tf_config"]["cluster"]["worker"])


def test_distribution_with_socket_level_part(slurm, jobdir):
    # Slurm reports e.g. SLURM_DISTRIBUTION=cyclic:block; only the node level (before ':') matters.
    job, tasks = run_env_job(slurm,
                             jobdir, ["--nodes=2", "--ntasks-per-node=2"],
                             srun_args="--distribution=cyclic:block",
                             env_args="--strategy=multi_worker")
    envs = check_tasks(job, tasks, 4)
    assert {t["slurm"]["SLURM_DISTRIBUTION"] for t in tasks} == {"cyclic:block"}
    assert [t["slurmd_nodename"] for t in tasks] == [N1, N2, N1, N2]
    assert [e["local_rank"] for e in envs] == [0, 0, 1, 1]
    check_own_address(tasks, envs[0]["tf_config"]["cluster"]["worker"])


def test_plane_distribution_is_refused_with_a_clear_error(slurm, jobdir):
    job, tasks = run_env_job(slurm,
                             jobdir, ["--nodes=2", "--ntasks-per-node=2"],
                             srun_args="--distribution=plane=2",
                             env_args="--strategy=multi_worker")
    assert job.state == "FAILED", job.describe()
    assert tasks, job.describe()
    for t in tasks:
        assert t["returncode"] != 0
        # Names the value received and the Slurm option to change.
        assert "SLURM_DISTRIBUTION='plane'" in t["stderr"], t["stderr"]
        assert "not supported" in t["stderr"] and "--distribution=block" in t["stderr"]


# The test nodes have no GPU. The batch script sets CUDA_VISIBLE_DEVICES=0,1 as Slurm does for
# every task of a node with --gres=gpu:2; srun gives the real ranks and local ranks.
GRES_2 = "export CUDA_VISIBLE_DEVICES=0,1\n"


def test_gpus_of_the_seed_layout_one_per_task_by_local_rank(slurm, jobdir):
    job, tasks = run_env_job(slurm,
                             jobdir, ["--nodes=2", "--ntasks-per-node=2"],
                             env_args="--strategy=horovod --nocheck_port",
                             setup=GRES_2)
    envs = check_tasks(job, tasks, 4)
    assert [e["gpus"]["summary"] for e in envs] == ["GPU 0 of node", "GPU 1 of node"] * 2
    assert {e["gpus"]["mechanism"] for e in envs} == {"set_visible_devices"}


def test_three_tasks_on_two_gpus_fail_in_every_task(slurm, jobdir):
    job, tasks = run_env_job(slurm,
                             jobdir, ["--nodes=1", "--ntasks=2"],
                             srun_args="--kill-on-bad-exit=0 --ntasks=3 --overcommit",
                             env_args="--strategy=horovod --nocheck_port",
                             setup=GRES_2)
    assert job.state == "FAILED", job.describe()
    assert [t["returncode"] for t in tasks] == [2, 2, 2]
    for t in tasks:
        assert "3 tasks on this node use GPUs but they see 2" in t["stderr"], t["stderr"]
