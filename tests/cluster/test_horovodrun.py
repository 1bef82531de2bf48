"""horovodrun's processes: which variables are horovodrun's, and the ranks they give on the Cluster
(parsing only; Horovod set up from them: tests/horovod)."""

import pytest

from tfdist.cluster import Cluster, ClusterError, detect
from tfdist.cluster import horovodrun
from tfdist.cluster.local import launch_environ

from tests.cluster.test_slurm import step

# The cluster layer imports no TensorFlow: nothing here changes with its version.
pytestmark = pytest.mark.default_stack


def cluster(rank, hosts):
    return Cluster("slurm", rank, len(hosts), tuple(hosts), job_id="7")


HOROVODRUN_GLOO = {
    "HOROVOD_RANK": "1",
    "HOROVOD_SIZE": "2",
    "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.1",
    "HOROVOD_GLOO_RENDEZVOUS_PORT": "4321",
}


@pytest.mark.parametrize(
    "environ, expected",
    [
        ({}, False),
        (HOROVODRUN_GLOO, True),
        ({
            **HOROVODRUN_GLOO, "SLURM_JOB_ID": "7"
        }, True),  # horovodrun inside a Slurm allocation
        ({
            **HOROVODRUN_GLOO, horovodrun.OWNED: "1"
        }, False),  # what the Horovod engine wrote itself
        ({
            **HOROVODRUN_GLOO,
            **launch_environ(1, 2, 20000)
        }, False),  # tfdist launch
        ({
            "HOROVOD_RANK": "0",
            "HOROVOD_SIZE": "2"
        }, False),  # stray variables, no rendezvous
        ({
            "OMPI_COMM_WORLD_RANK": "0",
            "OMPI_COMM_WORLD_SIZE": "2"
        }, False),  # mpirun: tfdist sets gloo up from its ranks, as under srun
    ])
def test_horovodrun_environment(environ, expected):
    assert (horovodrun.read(environ) is not None) is expected


def test_stale_horovod_variables_in_an_srun_step_are_ignored():
    srun = {**HOROVODRUN_GLOO, "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"}
    # Task 0 of 2 under srun, but HOROVOD_RANK=1 came from the batch script: stale.
    assert horovodrun.read(srun, cluster(0, ["a", "b"])) is None
    why = horovodrun.inherited(srun, cluster(0, ["a", "b"]))
    assert why == ("Ignoring HOROVOD_RANK=1 HOROVOD_SIZE=2 inherited by Slurm task 0 of 2; tfdist "
                   "sets Horovod up from Slurm.")
    # Rank and size agree with Slurm's: kept (horovodrun may have set them).
    assert horovodrun.read(srun, cluster(1, ["a", "b"])) is not None
    assert horovodrun.inherited(srun, cluster(1, ["a", "b"])) is None
    # Outside an srun step a Slurm cluster has one task (the cluster layer refuses more), and
    # there horovodrun's variables win.
    assert horovodrun.read(srun, cluster(0, ["a"])) is not None
    # Through detection: task 0 of an srun step of 4 with a batch script's HOROVOD_RANK=1.
    detected = detect({**step(0, "node1"), **HOROVODRUN_GLOO})
    assert (detected.environment, detected.rank, detected.horovodrun) == ("slurm", 0, None)


def test_under_horovodrun_the_gpu_follows_horovods_local_rank():
    # horovodrun sets the ranks; tfdist's own cluster then knows nothing of them, and carries
    # horovodrun's beside its own (tfdist.init pins the GPU of horovodrun's local rank).
    horovodrun_environ = {
        "HOROVOD_RANK": "3",
        "HOROVOD_SIZE": "4",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "node1",
        "HOROVOD_LOCAL_RANK": "1",
        "HOROVOD_LOCAL_SIZE": "2"
    }
    detected = detect(horovodrun_environ)
    assert detected.horovodrun.local == (1, 2)
    assert (detected.horovodrun.rank, detected.horovodrun.size) == (3, 4)
    assert (detected.environment, detected.rank, detected.world_size) == ("local", 0, 1)
    # Under mpirun the ranks are tfdist's cluster (tfdist.cluster.mpi): its local rank applies.
    mpirun = {
        "OMPI_COMM_WORLD_RANK": "1",
        "OMPI_COMM_WORLD_SIZE": "4",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "4"
    }
    assert detect(mpirun).horovodrun is None
    assert detect(mpirun).local_rank == 1
    # Variables tfdist wrote itself: the cluster's local rank applies.
    assert detect(dict(horovodrun_environ, TFDIST_HOROVOD="1")).horovodrun is None
    # No local rank said: none to follow.
    assert detect(HOROVODRUN_GLOO).horovodrun.local is None


def test_a_rank_that_is_not_a_number_is_named():
    with pytest.raises(ClusterError, match="HOROVOD_RANK='one' is not an integer"):
        horovodrun.read(dict(HOROVODRUN_GLOO, HOROVOD_RANK="one"))
