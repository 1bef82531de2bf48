"""The launchers that name each process's rank but not where the others run (mpirun, mpiexec,
flux run, jsrun): parsing their documented variables (faked here; Open MPI 4.1 and MPICH 4.0 as
measured here), and the host exchange between real processes. Real mpirun runs:
tests/distribute/test_mpirun.py."""

from __future__ import annotations

import json
import multiprocessing
import os

import pytest

from tfdist.cluster import ENVIRONMENTS, ClusterError, build_roles, detect
from tfdist.cluster.host_exchange import TASK_HOSTS, exchange_hosts
from tfdist.cluster.launched import LaunchedEnv

from tests.cluster.test_slurm import step

# The cluster layer imports no TensorFlow: nothing here changes with its version.
pytestmark = pytest.mark.default_stack

LAUNCHED = [env for env in ENVIRONMENTS if issubclass(env, LaunchedEnv)]


def openmpi(rank, size=2, local=None, nodes=1, **extra):
    """What Open MPI 4.1.4's mpirun gave rank 1 of 2 here (its `env`), for any rank and layout."""
    local_rank, local_size = local or (rank, size)
    return {
        "OMPI_COMM_WORLD_RANK": str(rank),
        "OMPI_COMM_WORLD_SIZE": str(size),
        "OMPI_COMM_WORLD_LOCAL_RANK": str(local_rank),
        "OMPI_COMM_WORLD_LOCAL_SIZE": str(local_size),
        "OMPI_MCA_orte_num_nodes": str(nodes),
        "OMPI_MCA_ess_base_jobid": "59310081",
        "PMIX_NAMESPACE": "59310081",
        "PMIX_RANK": str(rank),
        "PMIX_HOSTNAME": "vm",
        **extra
    }


def hydra(rank, size=2, local=None, host="vm", **extra):
    """What MPICH 4.0.2's mpiexec (Hydra) gave here: no launch id, the host as Hydra names it."""
    local_rank, local_size = local or (rank, size)
    return {
        "PMI_RANK": str(rank),
        "PMI_SIZE": str(size),
        "MPI_LOCALRANKID": str(local_rank),
        "MPI_LOCALNRANKS": str(local_size),
        "PMI_FD": "8",
        "MPIR_CVAR_CH3_INTERFACE_HOSTNAME": host,
        **extra
    }


# Rank 1 of 3 on one node, as each launcher says it.
ONE_NODE = {
    "openmpi": openmpi(1, 3),
    "hydra": hydra(1, 3),
    "mvapich": {
        "MV2_COMM_WORLD_RANK": "1",
        "MV2_COMM_WORLD_SIZE": "3",
        "MV2_COMM_WORLD_LOCAL_RANK": "1",
        "MV2_COMM_WORLD_LOCAL_SIZE": "3"
    },
    "pals": {
        "PALS_RANKID": "1",
        "PALS_LOCAL_RANKID": "1",
        "PALS_LOCAL_SIZE": "3",
        "PMI_RANK": "1",
        "PMI_SIZE": "3",
        "PALS_APID": "4a1b"
    },
    "flux": {
        "FLUX_TASK_RANK": "1",
        "FLUX_JOB_SIZE": "3",
        "FLUX_TASK_LOCAL_ID": "1",
        "FLUX_JOB_NNODES": "1",
        "FLUX_JOB_ID": "f2Vkqu6Zk"
    },
    "lsf": {
        "JSM_NAMESPACE_RANK": "1",
        "JSM_NAMESPACE_SIZE": "3",
        "JSM_NAMESPACE_LOCAL_RANK": "1",
        "JSM_NAMESPACE_LOCAL_SIZE": "3",
        "LSB_JOBID": "812"
    },
}


def test_every_launcher_is_covered():
    assert sorted(ONE_NODE) == sorted(env.name for env in LAUNCHED)


@pytest.mark.parametrize("name", sorted(ONE_NODE))
@pytest.mark.parametrize("strategy", ["multi_worker", "horovod", "parameter_server"])
def test_one_node_needs_no_exchange(name, strategy):
    cluster = detect(dict(ONE_NODE[name]))
    assert (cluster.environment, cluster.rank, cluster.world_size) == (name, 1, 3)
    assert (cluster.task_hosts, cluster.local_rank) == (("localhost", ) * 3, 1)
    roles = build_roles(cluster, strategy)
    base = (roles.port or 0) - 1
    if strategy == "multi_worker":
        assert roles.tf_config["cluster"]["worker"] == [f"localhost:{base + i}" for i in range(3)]
        assert roles.tf_config["task"] == {"type": "worker", "index": 1}
    elif strategy == "parameter_server":
        assert roles.tf_config["cluster"]["ps"] == [f"localhost:{base + 1}"]
        assert roles.tf_config["task"] == {"type": "ps", "index": 0}
    else:
        assert roles.horovod["HOROVOD_LOCAL_RANK"] == "1"


def test_the_port_base_follows_the_launch():
    # Two mpirun launches on one node get different ports; the ranks of one agree.
    ports = {
        build_roles(detect(openmpi(0, OMPI_MCA_ess_base_jobid=job)), "multi_worker").port
        for job in ("59310081", "59310082")
    }
    assert len(ports) == 2
    flux = build_roles(detect(dict(ONE_NODE["flux"])), "multi_worker")
    assert 20000 <= flux.port < 32000  # an f58 id, hashed


@pytest.mark.parametrize(
    "inner,outer",
    [
        # mpirun in a Slurm job starts its ranks through an srun step of its daemons (one per
        # node), whose SLURM_PROCID is the node's: the ranks are mpirun's.
        (openmpi(3, 4, local=(1, 2), nodes=2), step(1, "node2", ntasks=2, tpn="1(x2)")),
        (hydra(0, 2, local=(0, 1)), {
            "FLUX_TASK_RANK": "0",
            "FLUX_JOB_SIZE": "1",
            "FLUX_JOB_ID": "f3"
        }),
    ])
def test_the_innermost_launcher_wins(inner, outer):
    environ = {**outer, **inner}
    env = next(e for e in LAUNCHED if e.is_present(inner))
    assert next(e for e in ENVIRONMENTS if e.is_present(environ)) is env


def test_srun_pmi_variables_are_slurms():
    # srun --mpi=pmi2 sets PMI_RANK and PMI_SIZE beside Slurm's, never Hydra's MPI_LOCALRANKID.
    cluster = detect(step(1, "node1", ntasks=4, tpn="2(x2)", PMI_SIZE="4", PMI_RANK="1"))
    assert cluster.environment == "slurm"


@pytest.mark.parametrize("bad,message", [
    (openmpi(2, 2), "OMPI_COMM_WORLD_RANK=2 is out of range for OMPI_COMM_WORLD_SIZE=2"),
    (hydra(0, 2, PMI_SIZE="two"), "PMI_SIZE='two' is not an integer"),
])
def test_inconsistent_variables_are_named(bad, message):
    with pytest.raises(ClusterError, match=message):
        detect(bad)


def test_several_nodes_without_a_launch_id_outside_a_batch_job_are_refused():
    with pytest.raises(ClusterError) as refused:
        detect(hydra(1, 2, local=(0, 1)))
    assert "TFDIST_RENDEZVOUS_ID" in str(refused.value) and "rank 1 of 2" in str(refused.value)


def test_a_rank_that_never_comes_is_named(tmp_path):
    environ = hydra(1,
                    3,
                    local=(0, 1),
                    TFDIST_RENDEZVOUS_ID="7",
                    TFDIST_RENDEZVOUS_DIR=str(tmp_path),
                    TFDIST_RENDEZVOUS_TIMEOUT="0.2")
    with pytest.raises(ClusterError) as refused:
        detect(environ)
    said = str(refused.value)
    assert "rank(s) 0, 2" in said and str(tmp_path) in said and "TFDIST_RENDEZVOUS_DIR" in said


# --- the exchange, between real processes -------------------------------------------------------


def _rank(args):
    rank, hosts, directory = args
    local = (hosts[:rank].count(hosts[rank]), hosts.count(hosts[rank]))
    environ = hydra(rank,
                    len(hosts),
                    local=local,
                    host=hosts[rank],
                    TFDIST_RENDEZVOUS_ID="4242",
                    TFDIST_RENDEZVOUS_DIR=directory)
    cluster = detect(environ)
    roles = build_roles(cluster, "parameter_server", num_ps=2)
    return cluster.rank, cluster.task_hosts, cluster.local_rank, environ[TASK_HOSTS], roles


@pytest.mark.parametrize(
    "hosts",
    [
        ["node-a", "node-b", "node-a", "node-b"],  # mpiexec's default: round-robin over 2 nodes
        ["node-a", "node-a", "node-a", "node-b"],  # uneven: 3 ranks and 1
        ["n1", "n2", "n3", "n4", "n5"],  # 5 nodes, one rank each
    ],
    ids=["round_robin", "uneven", "five_nodes"])
def test_ranks_on_several_nodes_exchange_their_hosts(hosts, tmp_path):
    """Real processes, as mpiexec would start them: every one learns every rank's host from the
    others, in rank order, and builds the same parameter-server cluster; the directory is
    removed."""
    with multiprocessing.get_context("spawn").Pool(len(hosts)) as pool:
        results = pool.map(_rank, [(r, hosts, str(tmp_path)) for r in range(len(hosts))])
    specs = {json.dumps(roles.tf_config["cluster"], sort_keys=True) for *_, roles in results}
    assert len(specs) == 1  # one cluster, seen alike by every rank
    for rank, task_hosts, local_rank, exported, roles in results:
        assert task_hosts == tuple(hosts)
        assert local_rank == hosts[:rank].count(hosts[rank])
        # Exported for the processes the rank starts: they read it instead of exchanging again.
        assert json.loads(exported) == {"launch": "hydra-4242", "hosts": hosts}
        assert roles.tf_config["task"]["type"] == ["chief", "ps", "ps", "worker", "worker"][rank]
        host = roles.tf_config["cluster"][roles.tf_config["task"]["type"]][roles.tf_config["task"]
                                                                           ["index"]]
        assert host.split(":")[0] == hosts[rank]
    assert os.listdir(tmp_path) == []


def test_an_exchanged_result_is_read_again_without_waiting(tmp_path):
    environ = hydra(0,
                    2,
                    local=(0, 1),
                    host="node-a",
                    TFDIST_RENDEZVOUS_ID="1",
                    TFDIST_RENDEZVOUS_DIR=str(tmp_path),
                    TFDIST_RENDEZVOUS_TIMEOUT="0.2")
    environ[TASK_HOSTS] = json.dumps({"launch": "hydra-1", "hosts": ["node-a", "node-b"]})
    assert detect(environ).task_hosts == ("node-a", "node-b")
    # Another launch's hosts are not taken: this one waits for its rank 1 and says so.
    environ[TASK_HOSTS] = json.dumps({"launch": "hydra-0", "hosts": ["x", "y"]})
    with pytest.raises(ClusterError, match="rank\\(s\\) 1"):
        detect(environ)


def test_nodes_that_disagree_on_their_names_are_refused(tmp_path):
    # Rank 1 says it is process 1 of its node, but the hosts make it the first on node-b.
    environ = hydra(1, 2, local=(1, 2), TFDIST_RENDEZVOUS_ID="1")
    environ["MPI_LOCALNRANKS"] = "1"
    environ[TASK_HOSTS] = json.dumps({"launch": "hydra-1", "hosts": ["node-a", "node-b"]})
    with pytest.raises(ClusterError, match="MPI_LOCALRANKID=1, but rank 1 is process 0 of 1"):
        detect(environ)


def test_exchange_hosts_needs_a_writable_directory(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(ClusterError, match="cannot write its host"):
        exchange_hosts("x", 0, 2, "h", {"TFDIST_RENDEZVOUS_DIR": str(blocked)})
