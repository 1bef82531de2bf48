"""The strategy a launcher chose (TFDIST_STRATEGY, from `jobs/*.sbatch` and `tfdist launch`), read
in every environment: tfdist.init()'s "auto" takes it, a script asking for another is refused
naming both (fake environments; the real processes: tests/cli/test_launch_strategy.py, the batch
scripts: tests/test_job_strategy.py and tests/slurm/test_job_strategy.py)."""

import pytest

from tfdist.cluster import ClusterError, build_roles, detect
from tfdist.cluster.launcher_choice import LAUNCH, choice_environ, read_choice
from tfdist.cluster.local import launch_environ
from tests.cluster.test_launchers import openmpi
from tests.cluster.test_roles import slurm_task
from tests.cluster.test_slurm import step


def job(strategy, **parts):
    """What jobs/<strategy>.sbatch exports (jobs/common.sh)."""
    return choice_environ(strategy, f"jobs/{strategy}.sbatch", **parts)


def slurm(rank, strategy, **parts):
    hosts = ["node1"] * 2 + ["node2"] * 2
    return detect(dict(step(rank, hosts[rank]), **job(strategy, **parts)))


@pytest.mark.parametrize(
    "environ,environment",
    [
        (step(1, "node1"), "slurm"),
        (openmpi(1), "openmpi"),
        (launch_environ(1, 2, 29400), "local"),
        ({}, "local"),  # one process
    ],
    ids=["slurm", "openmpi", "tfdist_launch", "single_process"])
def test_every_environment_reads_the_jobs_strategy(environ, environment):
    c = detect(dict(environ, **job("horovod")))
    assert (c.environment, c.strategy, c.strategy_by) == (environment, "horovod",
                                                          "jobs/horovod.sbatch")
    roles = build_roles(c)  # tfdist.init() with no argument
    assert roles.strategy == "horovod" and roles.horovod["HOROVOD_RANK"] == str(c.rank)
    assert build_roles(c, "horovod").horovod == roles.horovod  # the same asked explicitly


def test_without_a_choice_auto_stays_multi_worker():
    c = slurm_task(1)
    assert (c.strategy, c.strategy_by, c.num_ps, c.evaluator) == (None, None, None, None)
    assert build_roles(c).strategy == "multi_worker"
    assert read_choice({}) == {} and choice_environ("auto", "jobs/x.sbatch") == {}


def test_a_script_asking_for_another_strategy_is_refused_naming_both():
    c = slurm(0, "horovod")
    with pytest.raises(ClusterError) as e:
        build_roles(c, "multi_worker")
    message = str(e.value)
    assert message.startswith("jobs/horovod.sbatch runs this job with --strategy=horovod, but "
                              "this process asks for --strategy=multi_worker "
                              "(tfdist.init(strategy='multi_worker') in the script"), message
    assert "leave strategy out of the script" in message
    assert "submit `jobs/multi_worker.sbatch` instead" in message


def test_tfdist_launchs_strategy_is_refused_alike():
    c = detect(launch_environ(1, 2, 29400, strategy="horovod"))
    assert (c.strategy, c.strategy_by) == ("horovod", LAUNCH)
    with pytest.raises(ClusterError,
                       match=r"^tfdist launch runs this job with --strategy=horovod, but this "
                       r"process asks for --strategy=multi_worker .* "
                       r"`tfdist launch --strategy=multi_worker`\.$"):
        build_roles(c, "multi_worker")


def test_the_single_task_strategy_of_mirrored_sbatch():
    c = detect(dict(step(0, "node1", nodelist="node1", ntasks=1, tpn="1"), **job("mirrored")))
    assert build_roles(c).strategy == "mirrored"
    with pytest.raises(ClusterError,
                       match=r"jobs/mirrored.sbatch runs this job with "
                       r"--strategy=mirrored, but this process asks for --strategy=one_device"):
        build_roles(c, "one_device")


def test_parameter_server_takes_the_jobs_num_ps_and_evaluator():
    hosts = ["node1"] * 3 + ["node2"] * 3
    environ = dict(step(5, hosts[5], ntasks=6, tpn="3(x2)"),
                   **job("parameter_server", num_ps=2, evaluator=True))
    c = detect(environ)
    assert (c.num_ps, c.evaluator) == (2, True)
    for asked in ({}, {"num_ps": 2, "evaluator": True}):
        roles = build_roles(c, "auto", **asked)
        assert (roles.strategy, roles.task_type) == ("parameter_server", "evaluator")
        spec = roles.tf_config["cluster"]
        assert [len(spec[t]) for t in ("chief", "ps", "worker", "evaluator")] == [1, 2, 2, 1]


def test_another_num_ps_or_evaluator_is_refused_naming_both():
    c = slurm(0, "parameter_server", num_ps=1)
    with pytest.raises(ClusterError) as e:
        build_roles(c, "parameter_server", num_ps=2)
    message = str(e.value)
    assert message.startswith("jobs/parameter_server.sbatch runs this job with --num_ps=1, but "
                              "this process asks for --num_ps=2 (tfdist.init(num_ps=2) in the "
                              "script"), message
    assert "`NUM_PS=2 sbatch jobs/parameter_server.sbatch ...`" in message
    # The job said nothing of an evaluator: the script's choice stands (the job has 4 tasks:
    # chief, ps, and 2 workers, or 1 worker and the evaluator).
    assert build_roles(slurm(3, "parameter_server", num_ps=1), evaluator=True).is_evaluator
    c = slurm(3, "parameter_server", num_ps=1, evaluator=False)
    with pytest.raises(ClusterError,
                       match=r"runs this job with no evaluator task, but this process asks for "
                       r"an evaluator task \(tfdist.init\(evaluator=True\) .* `EVALUATOR=1 sbatch "
                       r"jobs/parameter_server.sbatch \.\.\.`"):
        build_roles(c, evaluator=True)
    # num_ps means nothing to another strategy: not compared.
    assert build_roles(slurm(0, "horovod"), num_ps=3).strategy == "horovod"


def test_tfdist_launch_passes_num_ps_and_evaluator():
    c = detect(launch_environ(0, 5, 29400, strategy="parameter_server", num_ps=2, evaluator=False))
    assert (c.strategy, c.num_ps, c.evaluator) == ("parameter_server", 2, False)
    assert build_roles(c).tf_config["cluster"]["ps"] == ["localhost:29401", "localhost:29402"]
    with pytest.raises(ClusterError, match=r"`tfdist launch --num_ps=1`"):
        build_roles(c, num_ps=1)
    with pytest.raises(ClusterError, match=r"`tfdist launch --evaluator`"):
        build_roles(c, evaluator=True)


@pytest.mark.parametrize("bad,message", [
    ({
        "TFDIST_STRATEGY": "horovd",
        "TFDIST_STRATEGY_BY": "jobs/x.sbatch"
    },
     r"TFDIST_STRATEGY='horovd' \(set by jobs/x.sbatch\) is not a strategy: expected one of auto, "
     ),
    ({
        "TFDIST_STRATEGY": "parameter_server",
        "TFDIST_NUM_PS": "two"
    }, r"TFDIST_NUM_PS='two' \(set by TFDIST_STRATEGY=parameter_server\) is not a number"),
    ({
        "TFDIST_STRATEGY": "parameter_server",
        "TFDIST_NUM_PS": "0"
    }, r"TFDIST_NUM_PS='0'"),
    ({
        "TFDIST_STRATEGY": "parameter_server",
        "TFDIST_EVALUATOR": "yes"
    }, r"TFDIST_EVALUATOR='yes' .*expected 1 or 0"),
])
def test_bad_values_are_named(bad, message):
    with pytest.raises(ClusterError, match=message):
        detect(dict(step(0, "node1"), **bad))


def test_a_variable_set_by_hand_names_itself():
    c = detect(dict(openmpi(0), TFDIST_STRATEGY="horovod"))
    assert c.strategy_by == "TFDIST_STRATEGY=horovod" and build_roles(c).strategy == "horovod"
    with pytest.raises(ClusterError,
                       match=r"^TFDIST_STRATEGY=horovod runs this job with "
                       r"--strategy=horovod, .* set TFDIST_STRATEGY=multi_worker there\.$"):
        build_roles(c, "multi_worker")
