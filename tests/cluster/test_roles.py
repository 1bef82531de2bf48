import pytest

from tfdist.cluster import ClusterError, build_roles, detect
from tfdist.cluster.local import launch_environ
from tests.cluster.test_slurm import step


def slurm_task(rank, tpn="2(x2)", ntasks=4, **extra):
    hosts = {
        "2(x2)": ["node1"] * 2 + ["node2"] * 2,
        "2,1": ["node1"] * 2 + ["node2"],
        "3(x2)": ["node1"] * 3 + ["node2"] * 3
    }[tpn]
    return detect(step(rank, hosts[rank], ntasks=ntasks, tpn=tpn, **extra))


def test_multi_worker_every_task_a_worker_with_its_own_port():
    roles = build_roles(slurm_task(3), "multi_worker")
    base = 20000 + (4242 % 750) * 16
    assert roles.tf_config == {
        "cluster": {
            "worker": [f"node1:{base}", f"node1:{base + 1}", f"node2:{base}", f"node2:{base + 1}"]
        },
        "task": {
            "type": "worker",
            "index": 3
        },
    }
    assert (roles.port, roles.trains) == (base + 1, True)


def test_auto_picks_multi_worker_for_several_tasks():
    assert build_roles(slurm_task(1)).strategy == "multi_worker"


@pytest.mark.parametrize("rank,task", [(0, ("chief", 0)), (1, ("ps", 0)), (2, ("worker", 0)),
                                       (3, ("worker", 1))])
def test_parameter_server_roles(rank, task):
    roles = build_roles(slurm_task(rank), "parameter_server", num_ps=1, port=30000)
    assert roles.tf_config["cluster"] == {
        "chief": ["node1:30000"],
        "ps": ["node1:30001"],
        "worker": ["node2:30000", "node2:30001"]
    }
    assert (roles.task_type, roles.task_index) == task
    # Only the chief runs model.fit (the engine's chief is rank 0).
    assert roles.trains == (rank == 0) and not roles.is_evaluator


def test_parameter_server_with_evaluator_and_two_ps():
    roles = build_roles(slurm_task(5, tpn="3(x2)", ntasks=6),
                        "parameter_server",
                        num_ps=2,
                        evaluator=True,
                        port=30000)
    assert {
        k: len(v)
        for k, v in roles.tf_config["cluster"].items()
    } == {
        "chief": 1,
        "ps": 2,
        "worker": 2,
        "evaluator": 1
    }
    assert (roles.task_type, roles.task_index, roles.is_evaluator) == ("evaluator", 0, True)


def test_too_few_tasks_for_parameter_server():
    with pytest.raises(ClusterError,
                       match=r"--strategy=parameter_server with --num_ps=2 needs at "
                       r"least 4 tasks \(1 chief \+ 2 ps \+ at least 1 worker\), but the job has "
                       r"3\. Launch 4 or more tasks \(Slurm: --ntasks=4\) or lower --num_ps"):
        build_roles(slurm_task(0, tpn="2,1", ntasks=3), "parameter_server", num_ps=2)


def test_horovod_variables_block():
    hvd = build_roles(slurm_task(2), "horovod", port=25000).horovod
    assert hvd == {
        "HOROVOD_RANK": "2",
        "HOROVOD_SIZE": "4",
        "HOROVOD_LOCAL_RANK": "0",
        "HOROVOD_LOCAL_SIZE": "2",
        "HOROVOD_CROSS_RANK": "1",
        "HOROVOD_CROSS_SIZE": "2",
        "HOROVOD_HOSTNAME": "node2",
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "node1",
        "HOROVOD_GLOO_RENDEZVOUS_PORT": "25000"
    }


def test_horovod_cross_size_with_uneven_nodes():
    # 2 tasks on node1, 1 on node2: local rank 1 exists only on node1.
    hvd = build_roles(slurm_task(1, tpn="2,1", ntasks=3), "horovod").horovod
    assert (hvd["HOROVOD_LOCAL_SIZE"], hvd["HOROVOD_CROSS_RANK"],
            hvd["HOROVOD_CROSS_SIZE"]) == ("2", "0", "1")
    hvd = build_roles(slurm_task(2, tpn="2,1", ntasks=3), "horovod").horovod
    assert (hvd["HOROVOD_LOCAL_RANK"], hvd["HOROVOD_CROSS_RANK"],
            hvd["HOROVOD_CROSS_SIZE"]) == ("0", "1", "2")


def test_local_launch_roles_use_launcher_port():
    c = detect(launch_environ(1, 2, 29400))
    roles = build_roles(c, "multi_worker")
    assert roles.tf_config["cluster"]["worker"] == ["localhost:29400", "localhost:29401"]
    assert roles.port == 29401 and c.local_rank == 1


@pytest.mark.parametrize("strategy", ["mirrored", "one_device", "central_storage"])
def test_single_task_strategies(strategy):
    roles = build_roles(detect({}), strategy)
    assert (roles.tf_config, roles.horovod, roles.trains) == (None, None, True)
    with pytest.raises(ClusterError,
                       match=rf"--strategy={strategy} runs in a single task, but "
                       r"this job has 4 tasks"):
        build_roles(slurm_task(0), strategy)


def test_unknown_strategy_lists_valid_ones():
    with pytest.raises(ClusterError,
                       match=r"Unknown strategy 'ring': expected one of auto, "
                       r"mirrored, multi_worker, parameter_server, horovod"):
        build_roles(detect({}), "ring")


def test_auto_takes_the_launchers_strategy():
    c = detect(launch_environ(0, 4, 29400, strategy="parameter_server"))
    roles = build_roles(c)
    assert (roles.strategy, roles.task_type) == ("parameter_server", "chief")
    # The script's explicit choice no longer wins silently: tfdist launch's
    # (tests/cluster/test_launcher_choice.py).
    with pytest.raises(ClusterError,
                       match=r"tfdist launch runs this job with "
                       r"--strategy=parameter_server, but this process asks for "
                       r"--strategy=multi_worker"):
        build_roles(c, "multi_worker")
