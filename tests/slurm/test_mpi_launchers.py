"""MPI launchers across two real nodes: `mpiexec` (MPICH's Hydra) and `mpirun` (Open MPI) inside a
two-node allocation of the test cluster start one rank per node through Slurm, as on a cluster
where users call mpirun in their batch script. The ranks exchange their hosts through the shared
directory (tfdist.cluster.host_exchange), the launch named by Slurm's job and step (Hydra names
none) or by Open MPI's job id, and train a user's script as one job: the weights of one worker on
the global batch, the same on both nodes."""

from __future__ import annotations

import pytest

from tests.distribute.test_mpirun import launcher
from tests.distribute.test_same_math import SCRIPT, assert_same_ranks, assert_same_weights, load
from tests.distribute.test_same_math import single  # noqa: F401  (a fixture)
from tests.helpers import PYTHON, WAIT

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

COMMANDS = {
    # Hydra starts its proxies with srun (one per node); -ppn 1: one rank on each node.
    "mpich": "mpiexec.mpich -launcher slurm -n 2 -ppn 1",
    # Open MPI starts its daemons with srun and maps one rank per node.
    "openmpi": "mpirun.openmpi --allow-run-as-root -np 2 --map-by node -bind-to none",
}


@pytest.mark.parametrize("name,strategy", [("mpich", "multi_worker"), ("openmpi", "multi_worker")])
def test_two_nodes_train_as_one_job(name, strategy, slurm, jobdir, single):  # noqa: F811
    launcher(name)  # installed (or the test skips saying why)
    out = jobdir / "w.npz"
    script = (
        f"{COMMANDS[name]} {PYTHON} {SCRIPT} {strategy} {out} 2\n"
        # Every rank's view, for the message of a failure.
        f"{COMMANDS[name]} {PYTHON} -m tfdist.cli.main env --strategy={strategy}\n")
    job = slurm.sbatch(script, "--nodes=2", "--ntasks-per-node=1", workdir=jobdir, timeout=WAIT)
    assert job.state == "COMPLETED", job.describe()
    assert_same_weights(single(2), load(out), 2)
    assert_same_ranks(load(out), load(f"{out}.rank1.npz"))
    # Each rank on its own node, by the name the launcher or the node gave.
    assert '"nodes": [\n    "tfdist-node1",\n    "tfdist-node2"\n  ]' in job.log, job.log[-3000:]
