"""A process that a launcher tfdist cannot read (a PMI-only process manager) started as one of
several is never taken for a lone local process: every strategy is refused with the fix, instead of
N processes each training the whole run alone into one model directory. Parsing only: the
variables such a launcher sets. The launchers tfdist reads: test_launchers.py."""

import pytest

from tfdist.cluster import ClusterError, build_roles, detect
from tfdist.cluster.local import launch_environ
from tfdist.cluster.other_launchers import LAUNCHERS

from tests.cluster.test_slurm import step


@pytest.mark.parametrize("launcher,size_var,rank_var", LAUNCHERS)
@pytest.mark.parametrize("strategy",
                         ["auto", "multi_worker", "mirrored", "parameter_server", "horovod"])
def test_several_processes_of_another_launcher_are_refused(launcher, size_var, rank_var, strategy):
    cluster = detect({size_var: "2", rank_var: "1"})
    assert (cluster.environment, cluster.rank, cluster.world_size) == ("local", 0, 1)
    assert cluster.as_dict()["other_launcher"] == f"{launcher}: {rank_var}=1 of {size_var}=2"
    with pytest.raises(ClusterError) as refused:
        build_roles(cluster, strategy)
    message = str(refused.value)
    assert f"{rank_var}=1 of {size_var}=2" in message and f"--strategy={strategy}" in message
    assert "tfdist launch -n N" in message and "srun" in message and "mpirun" in message


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {
            "PMI_SIZE": "1",
            "PMI_RANK": "0"
        },  # one process
        {
            "PMI_SIZE": "x"
        },  # not a number: not a size
    ])
def test_one_process_is_one_process(environ):
    cluster = detect(environ)
    assert cluster.other_launcher is None and "other_launcher" not in cluster.as_dict()
    assert build_roles(cluster, "auto").strategy == "auto"


@pytest.mark.parametrize(
    "known",
    [
        step(1, "node1", ntasks=4, tpn="2(x2)", PMI_SIZE="4",
             PMI_RANK="1"),  # srun --mpi=pmi2 sets PMI_* beside Slurm's
        dict(launch_environ(1, 2, 20000), PMI_SIZE="2"),  # tfdist launch under a PMI launcher
    ])
def test_an_environment_tfdist_reads_comes_first(known):
    cluster = detect(known)
    assert cluster.world_size > 1 and cluster.other_launcher is None
