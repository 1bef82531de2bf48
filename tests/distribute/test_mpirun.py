"""Real `mpirun` and `mpiexec`: Open MPI's and MPICH's (Debian's openmpi-bin and mpich, installed
here when missing and possible, else the tests skip saying so). Their processes find their ranks
from the launcher's own variables and train as one job: a user's script with `tfdist.init()` ends
with the weights of one worker on the global batch, the same on both ranks, and `tfdist train`
learns digits as under `tfdist launch`. Horovod here has no MPI (gloo only): tfdist sets its
rendezvous up from mpirun's ranks, as under srun."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys

import pytest

from tfdist import env_vars

from tests.distribute.test_same_math import SCRIPT, assert_same_ranks, assert_same_weights, load
from tests.distribute.test_same_math import single  # noqa: F401  (a fixture)
from tests.cannot_run import cannot_run
from tests.helpers import TFDIST, WAIT, keras_environ, reached, requires_horovod, run

pytestmark = [pytest.mark.slow, pytest.mark.default_stack]

# The launchers as their users call them (Horovod's docs: `-bind-to none -map-by slot` so that
# TensorFlow's threads are not bound to one core each).
ROOT = ["--allow-run-as-root"] if os.geteuid() == 0 else []
LAUNCHERS = {
    "openmpi": ("openmpi-bin", "mpirun.openmpi",
                ["mpirun.openmpi", *ROOT, "-np", "2", "-bind-to", "none", "-map-by", "slot"]),
    "mpich": ("mpich", "mpiexec.mpich", ["mpiexec.mpich", "-n", "2"]),
}


def launcher(name: str) -> list[str]:
    """The command line that starts 2 processes. Installs the Debian package when it is missing
    (as tools/slurm/cluster.sh installs Slurm); where it cannot (not root), the test cannot run
    (tests/cannot_run.py: a skip, a failure under CI)."""
    package, binary, command = LAUNCHERS[name]
    if shutil.which(binary) is None:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            cannot_run(f"{binary} is missing and this is not root",
                       f"`apt-get install {package}` (as root) adds it")
        # The test Slurm cluster's lock: its `up` installs Slurm with apt-get under it at the
        # start of `make test`, and two apt-gets at once fail on dpkg's own lock.
        path = os.environ.get(env_vars.SLURM_LOCK.name, "/run/lock/tfdist-slurm.lock")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            wait = ["-o", "DPkg::Lock::Timeout=600"]  # any other apt-get on the machine
            for step in (["apt-get", *wait, "update",
                          "-q"], ["apt-get", *wait, "install", "-y", "-q", package]):
                if shutil.which(binary) is None:
                    done = subprocess.run(step,
                                          capture_output=True,
                                          text=True,
                                          env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
                    assert done.returncode == 0, f"`{' '.join(step)}`: {done.stderr[-500:]}"
    return command


# A user's own script (tests/distribute/same_math_script.py: tfdist.init, rt.scope, rt.dataset,
# model.fit), both Kerases, each engine under one launcher.
@pytest.mark.parametrize("name,strategy,keras", [
    ("openmpi", "multi_worker", 3),
    pytest.param("mpich", "horovod", 2, marks=requires_horovod),
])
def test_a_users_script_trains_as_one_job(name, strategy, keras, single, tmp_path):  # noqa: F811
    out = tmp_path / "w.npz"
    # The launcher passes the environment on: tf-keras's switch where the case is tf-keras.
    r = run([*launcher(name), sys.executable, SCRIPT, strategy, out, keras],
            env=keras_environ(keras),
            timeout=WAIT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert_same_weights(single(keras), load(out), 2)  # 2 replicas: one worker's math
    assert_same_ranks(load(out), load(f"{out}.rank1.npz"))


@pytest.mark.parametrize("name,strategy", [
    ("mpich", "multi_worker"),
    pytest.param("openmpi", "horovod", marks=requires_horovod),
])
def test_tfdist_train_learns_digits_as_two_ranks(name, strategy, tmp_path):
    model_dir = tmp_path / "run"
    r = run([
        *launcher(name), TFDIST, "train", f"--strategy={strategy}", "--pipeline=digits",
        f"--model_dir={model_dir}"
    ],
            timeout=WAIT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert (metrics["strategy"], metrics["world_size"], metrics["num_replicas"]) == (strategy, 2, 2)
    # The bound of the same run under `tfdist launch` (test_strategies_learn.py).
    assert reached(metrics["final"]["test_accuracy"], 0.95), metrics["final"]


def test_tfdist_env_names_the_launcher_and_every_rank():
    r = run([*launcher("openmpi"), TFDIST, "env", "--format=json", "--strategy=multi_worker"])
    assert r.returncode == 0, r.stderr[-3000:]
    decoder, text, ranks = json.JSONDecoder(), r.stdout.strip(), {}
    while text:
        one, end = decoder.raw_decode(text)
        ranks[one["rank"]] = one
        text = text[end:].strip()
    assert sorted(ranks) == [0, 1]
    workers = ranks[0]["tf_config"]["cluster"]["worker"]
    for rank, one in ranks.items():
        assert (one["environment"], one["world_size"], one["local_rank"]) == ("openmpi", 2, rank)
        assert one["tf_config"]["cluster"]["worker"] == workers
        assert one["tf_config"]["task"] == {"type": "worker", "index": rank}
