"""Horovod under srun on the real two-node test Slurm cluster: no horovodrun, ssh or MPI.
Each node is a network namespace; each task's gloo interface is chosen towards rank 0's node."""

import numpy as np
import pytest

from tests.helpers import WAIT, requires_horovod
from tests.horovod.helpers import WORKER
from tests.slurm.conftest import PYTHON, jobdir, slurm  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.horovod, requires_horovod]


def srun_job(slurm, jobdir, mode, sbatch_args):  # noqa: F811
    # hvd_worker.py's model is tf_keras: its tasks have tf-keras's switch, as its user exports it.
    script = (f"export TF_CPP_MIN_LOG_LEVEL=2 HOROVOD_GLOO_TIMEOUT_SECONDS=60 "
              f"TF_USE_LEGACY_KERAS=1\n"
              f"srun --kill-on-bad-exit=1 {PYTHON} {WORKER} {mode} {jobdir}/{mode}-{{rank}}.json\n")
    job = slurm.sbatch(script, *sbatch_args, workdir=jobdir, timeout=WAIT)
    assert job.state == "COMPLETED", job.describe()
    return job


def test_rings_of_two_nodes_with_two_tasks_each(slurm, jobdir):  # noqa: F811
    job = srun_job(slurm, jobdir, "init", ["--nodes=2", "--ntasks-per-node=2"])
    tasks = job.json_files("init-*.json")
    assert [t["rank"] for t in tasks] == [0, 1, 2, 3], job.describe()
    assert {t["size"] for t in tasks} == {4}
    assert [t["host"] for t in tasks] == ["tfdist-node1"] * 2 + ["tfdist-node2"] * 2
    assert [t["local"] for t in tasks] == [[0, 2], [1, 2], [0, 2], [1, 2]]
    assert [t["cross"] for t in tasks] == [[0, 2], [0, 2], [1, 2], [1, 2]]
    assert all(t["gloo_iface"] and t["gloo_iface"] != "lo" for t in tasks), tasks


def test_training_across_two_nodes_ends_with_equal_weights(slurm, jobdir):  # noqa: F811
    job = srun_job(slurm, jobdir, "train", ["--nodes=2", "--ntasks-per-node=1"])
    r0, r1 = job.json_files("train-*.json")
    assert (r0["host"], r1["host"]) == ("tfdist-node1", "tfdist-node2")
    assert not np.allclose(r0["initial_weights"][0], r1["initial_weights"][0])
    for a, b in zip(r0["weights"], r1["weights"]):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(r0["history"]["loss"], r1["history"]["loss"], rtol=1e-6)
