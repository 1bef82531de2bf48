"""`tfdist doctor`: every problem it checks for, produced on purpose and reported.

The CLI runs as a subprocess with a faked Slurm environment; GPUs are faked with Slurm's variables,
CUDA_VISIBLE_DEVICES and a fake `nvidia-smi` first on PATH. Tests that let doctor's child process
import TensorFlow are marked slow; the others skip those two checks.
"""

import json
import os
import shutil
import socket
import subprocess
import sys

from importlib.metadata import version

import pytest

from tests.cannot_run import cannot_run
from tests.cluster.test_slurm import step
from tests.helpers import TFDIST, clean_environ, free_port
from tests.slurm.conftest import jobdir, slurm  # noqa: F401  (fixtures)
from tfdist import doctor
from tfdist.cluster import detect
from tfdist.distribute.horovod_setup import INSTALL_HINT

NO_TF = ("--skip=tensorflow,horovod", )


def doctor_environ():
    """A clean environment without the GPU and path settings doctor looks at."""
    env = clean_environ()
    for name in ("CUDA_VISIBLE_DEVICES", "PYTHONPATH"):
        env.pop(name, None)
    return env


def run_doctor(env, *args, path_first=None, pythonpath=None, timeout=120):
    environ = dict(doctor_environ(), **env)
    if path_first is not None:
        environ["PATH"] = f"{path_first}{os.pathsep}{environ['PATH']}"
    if pythonpath is not None:
        environ["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([TFDIST, "doctor", *args],
                          env=environ,
                          capture_output=True,
                          text=True,
                          timeout=timeout)


def lines(r, check):
    return [line for line in r.stdout.splitlines() if line[9:].startswith(f"{check}: ")]


def one_node(procid=0, ntasks=2, **extra):
    """A Slurm step of `ntasks` tasks on one node named localhost (it resolves everywhere)."""
    return step(procid, "localhost", nodelist="localhost", ntasks=ntasks, tpn=str(ntasks), **extra)


def fake_nvidia_smi(folder, gpus):
    folder.mkdir(exist_ok=True)
    listing = "".join(f'echo "GPU {i}: NVIDIA A100-SXM4-40GB (UUID: GPU-{i:08d})"\n'
                      for i in range(gpus))
    script = folder / "nvidia-smi"
    script.write_text(f'#!/bin/sh\n[ "$1" = "-L" ] || exit 2\n{listing}')
    script.chmod(0o755)
    return folder


# --- the command, without TensorFlow --------------------------------------------------------


def test_healthy_step_prints_one_line_per_check_and_exits_0(tmp_path):
    port = free_port()
    r = run_doctor(one_node(SLURM_LOCALID=0), "--strategy=multi_worker", f"--port={port}",
                   f"--model_dir={tmp_path}/run", *NO_TF)
    assert r.returncode == 0, r.stdout + r.stderr
    assert lines(r, "cluster") == [
        "ok       cluster: slurm, job 4242: rank 0 of 2 on localhost (node 1 of 1, local rank 0 "
        "of 2), strategy multi_worker, task worker:0"
    ]
    assert lines(r, "port") == [f"ok       port: {port} free on localhost (rank 0)"]
    assert lines(r, "hosts") == ["ok       hosts: 1 node name(s) resolve: localhost"]
    assert not lines(r, "network")  # one node: nothing to say about the network
    assert lines(r, "gpus")[0].startswith("warn     gpus: no GPU visible")
    assert lines(r, "model_dir") == [
        f"ok       model_dir: {tmp_path}/run will be created in {tmp_path} (writable)"
    ]
    assert not lines(r, "tensorflow") and not lines(r, "horovod")
    assert r.stdout.splitlines()[-1] == "tfdist doctor: no problems (4 ok, 1 warn)."


def test_cluster_error_is_a_problem_and_skips_what_needs_the_cluster():
    batch_script = {  # the batch script itself, no srun: no SLURM_STEP_* variable
        "SLURM_JOB_ID": "9",
        "SLURM_JOB_NODELIST": "node[1-2]",
        "SLURM_NTASKS": "4",
        "SLURM_TASKS_PER_NODE": "2(x2)",
        "SLURM_PROCID": "0"
    }
    r = run_doctor(batch_script, *NO_TF)
    assert r.returncode == 1
    [line] = lines(r, "cluster")
    assert line.startswith("PROBLEM  cluster: ") and "outside any srun step" in line
    for check in ("port", "hosts"):
        assert lines(r, check) == [
            f"skip     {check}: not checked: the cluster was not detected (see above)"
        ]
    assert r.stdout.splitlines()[-1].endswith(
        "training would fail (cluster); fix the PROBLEM lines above.")
    assert "Traceback" not in r.stderr


def test_port_in_use():
    with socket.socket() as s:
        s.bind(("", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_doctor(one_node(), "--strategy=multi_worker", f"--port={port}", *NO_TF)
    assert r.returncode == 1
    [line] = lines(r, "port")
    assert line.startswith(f"PROBLEM  port: Port {port} on host localhost (rank 0) is already "
                           "in use; the task cannot start its server there.")
    assert "(port)" in r.stdout.splitlines()[-1]


@pytest.mark.parametrize("strategy, says", [
    ("multi_worker", "every task runs TensorFlow's gRPC server (this one on port {port}, all "
     "interfaces) for the whole job"),
    ("horovod", "rank 0 serves Horovod's rendezvous on port {port} of node1 until every rank has "
     "started, and gloo connects the ranks directly"),
])
def test_a_multi_node_job_is_told_what_it_opens_to_the_network(strategy, says):
    port = free_port()
    r = run_doctor(step(0, "node1", SLURM_LOCALID=0), f"--strategy={strategy}", f"--port={port}",
                   "--skip=hosts,tensorflow,horovod")
    assert lines(r, "network") == [
        f"info     network: 2 nodes: {says.format(port=port)}, without authentication: anyone "
        "who reaches these ports can read or change the training. Run on a private network or "
        "behind the cluster's firewall; see docs/security.md in tfdist."
    ], r.stdout + r.stderr
    assert r.returncode == 0


def test_unresolvable_host():
    env = step(0, "localhost", nodelist="localhost,nosuchhost-tfdist-1", ntasks=2, tpn="1(x2)")
    r = run_doctor(env, "--strategy=multi_worker", f"--port={free_port()}", *NO_TF)
    assert r.returncode == 1
    [line] = lines(r, "hosts")
    assert line.startswith("PROBLEM  hosts: cannot resolve nosuchhost-tfdist-1 (")
    assert "from localhost" in line and "localhost (" not in line
    assert "Check the node names (SLURM_STEP_NODELIST/SLURM_JOB_NODELIST" in line
    assert "DNS or /etc/hosts" in line


def test_gpus_fewer_seen_than_allocated(tmp_path):
    # One task on the node (with 2 tasks, 2 GPUs each of the node's 4 would be right).
    env = one_node(ntasks=1, SLURM_GPUS_ON_NODE=4, CUDA_VISIBLE_DEVICES="0,1")
    r = run_doctor(env, *NO_TF, path_first=fake_nvidia_smi(tmp_path / "bin", 2))
    assert r.returncode == 1
    assert lines(r, "gpus") == [
        "PROBLEM  gpus: Slurm allocated 4 GPU(s) to this node (SLURM_GPUS_ON_NODE=4), but this "
        "task sees 2 (CUDA_VISIBLE_DEVICES='0,1', nvidia-smi -L lists 2). Check that the job "
        "script does not set CUDA_VISIBLE_DEVICES itself and that the node's driver works "
        "(nvidia-smi -L); or request what the node can give: sbatch --gpus-per-node=2 "
        "(or --gres=gpu:2).",
        "ok       gpus: rank 0 (task 0 of 1 on this node) uses GPUs 0,1 of node "
        "(CUDA_VISIBLE_DEVICES='0,1', SLURM_GPUS_ON_NODE=4)"
    ]


def test_gpus_more_seen_than_allocated(tmp_path):
    env = one_node(SLURM_GPUS_PER_NODE="a100:1")
    r = run_doctor(env,
                   "--strategy=multi_worker",
                   f"--port={free_port()}",
                   *NO_TF,
                   path_first=fake_nvidia_smi(tmp_path / "bin", 4))
    assert r.returncode == 1
    line, placed = lines(r, "gpus")
    assert placed == ("ok       gpus: rank 0 (task 0 of 2 on this node) uses GPUs 0,1 of node, "
                      "pinned with tf.config.set_visible_devices (CUDA_VISIBLE_DEVICES unset, 4 "
                      "GPU(s) seen on every task)")
    assert line.startswith("PROBLEM  gpus: Slurm allocated 1 GPU(s) to this node "
                           "(SLURM_GPUS_PER_NODE=a100:1), but this task sees 4 "
                           "(CUDA_VISIBLE_DEVICES unset, nvidia-smi -L lists 4).")
    assert "Request them with sbatch --gpus-per-node=4 (or --gres=gpu:4)" in line


def test_gpus_as_requested_and_cpu_only_keep_exit_0(tmp_path):
    env = one_node(SLURM_GPUS_ON_NODE=2, CUDA_VISIBLE_DEVICES="0,1")
    r = run_doctor(env,
                   "--strategy=multi_worker",
                   f"--port={free_port()}",
                   *NO_TF,
                   path_first=fake_nvidia_smi(tmp_path / "bin", 2))
    assert r.returncode == 0, r.stdout
    assert lines(r, "gpus") == [
        "ok       gpus: 2 GPU(s) seen, as requested (SLURM_GPUS_ON_NODE=2; "
        "CUDA_VISIBLE_DEVICES='0,1', nvidia-smi -L lists 2)",
        "ok       gpus: rank 0 (task 0 of 2 on this node) uses GPU 0 of node, pinned with "
        "tf.config.set_visible_devices (CUDA_VISIBLE_DEVICES='0,1' on every task, "
        "SLURM_GPUS_ON_NODE=2)"
    ]
    # No GPU on a job that asked for none: a warning, not a failure.
    r = run_doctor(one_node(), "--strategy=multi_worker", f"--port={free_port()}", *NO_TF)
    assert r.returncode == 0
    assert lines(r, "gpus") == [
        "warn     gpus: no GPU visible (CUDA_VISIBLE_DEVICES unset, no nvidia-smi on PATH): "
        "TensorFlow will train on the CPU. Fine for a CPU job; for GPUs request them with "
        "sbatch --gpus-per-node=N (or --gres=gpu:N)."
    ]


def test_two_tasks_on_one_gpu_is_a_problem_with_the_fix(tmp_path):
    # The seed's layout with one task too many: --gres=gpu:2 --ntasks-per-node=3 under horovod.
    env = one_node(2, ntasks=3, SLURM_LOCALID=2, SLURM_GPUS_ON_NODE=2, CUDA_VISIBLE_DEVICES="0,1")
    r = run_doctor(env, "--strategy=horovod", *NO_TF, path_first=fake_nvidia_smi(tmp_path, 2))
    assert r.returncode == 1
    line = lines(r, "gpus")[-1]
    assert line.startswith("PROBLEM  gpus: 3 tasks on this node use GPUs but they see 2 "
                           "(CUDA_VISIBLE_DEVICES='0,1' on every task, SLURM_GPUS_ON_NODE=2): "
                           "horovod needs a GPU per task, so tasks would share one")
    assert "--ntasks-per-node=2" in line and "--gpus-per-task=1" in line
    assert "(gpus)" in r.stdout.splitlines()[-1]
    # The seed's own layout is fine: rank 1 takes GPU 1.
    env = one_node(1, ntasks=2, SLURM_LOCALID=1, SLURM_GPUS_ON_NODE=2, CUDA_VISIBLE_DEVICES="0,1")
    r = run_doctor(env, "--strategy=horovod", *NO_TF, path_first=fake_nvidia_smi(tmp_path, 2))
    assert r.returncode == 0, r.stdout
    assert lines(r, "gpus")[-1].startswith("ok       gpus: rank 1 (task 1 of 2 on this node) "
                                           "uses GPU 1 of node")


def test_model_dir_under_a_file(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    r = run_doctor({}, f"--model_dir={tmp_path}/file/sub", *NO_TF)
    assert r.returncode == 1
    assert lines(r, "model_dir") == [
        f"PROBLEM  model_dir: {tmp_path}/file/sub cannot be created: {tmp_path}/file is a file, "
        "not a directory. Choose another --model_dir, or move that file away."
    ]


def test_model_dir_not_writable(tmp_path):
    # Root ignores permission bits; an immutable directory refuses even root.
    locked = tmp_path / "locked"
    locked.mkdir()
    chattr = shutil.which("chattr")
    locking = chattr and subprocess.run([chattr, "+i", str(locked)], capture_output=True)
    if not locking or locking.returncode != 0:
        pytest.skip("chattr +i is not available on this file system")
    try:
        r = run_doctor({}, f"--model_dir={locked}/run", *NO_TF)
    finally:
        subprocess.run([chattr, "-i", str(locked)], check=True)
    assert r.returncode == 1
    [line] = lines(r, "model_dir")
    assert line.startswith(f"PROBLEM  model_dir: cannot write in {locked} (Operation not "
                           f"permitted), so the chief cannot write checkpoints in {locked}/run.")
    assert f"ls -ld {locked}" in line
    assert list(locked.iterdir()) == []


def test_json_format_and_skip(tmp_path):
    r = run_doctor({}, "--format=json", f"--model_dir={tmp_path}", "--skip=hosts",
                   "--skip=tensorflow", "--skip=horovod")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert [c["check"] for c in info["checks"]] == ["cluster", "port", "gpus", "model_dir"]
    assert info["checks"][3] == {
        "check": "model_dir",
        "status": "ok",
        "message": f"{tmp_path} writable"
    }
    assert info["problems"] == []


def test_unknown_skip_fails_at_parse_time():
    r = run_doctor({}, "--skip=firewall")
    assert r.returncode != 0
    assert "--skip takes names of checks: cluster, port, hosts, network, gpus, model_dir, " \
        "tensorflow, keras, horovod" in r.stderr


def test_tensorflow_timeout_is_a_problem(tmp_path):
    # A TensorFlow whose import hangs (shadowed on PYTHONPATH): doctor's child is killed in time,
    # and doctor itself, which never imports TensorFlow, is not slowed down by it.
    (tmp_path / "tensorflow").mkdir()
    (tmp_path / "tensorflow" / "__init__.py").write_text("import time\ntime.sleep(120)\n")
    r = run_doctor({}, "--tf_timeout=3", "--skip=hosts", pythonpath=tmp_path, timeout=60)
    assert r.returncode == 1
    assert lines(r, "tensorflow") == [
        "PROBLEM  tensorflow: importing tfdist and TensorFlow did not finish within 3 s. Raise "
        "--tf_timeout if the file system is slow, else run `python -c 'import tfdist, "
        "tensorflow'` to see where it hangs."
    ]
    assert lines(
        r, "horovod") == ["skip     horovod: not checked: TensorFlow did not load (see above)"]


def test_doctor_imports_no_tensorflow():
    code = ("import sys; from tfdist.cli import main\n"
            "try:\n    main.run(['tfdist', 'doctor', '--skip=tensorflow', '--skip=horovod'])\n"
            "except SystemExit:\n    pass\n"
            "assert 'tensorflow' not in sys.modules, 'tfdist doctor imported TensorFlow'\n"
            "print('no-tf')")
    r = subprocess.run([sys.executable, "-c", code],
                       env=doctor_environ(),
                       capture_output=True,
                       text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.strip().endswith("no-tf"), r.stderr


# --- the checks as functions ----------------------------------------------------------------


@pytest.mark.parametrize("env,expected", [
    ({}, None),
    ({
        "SLURM_GPUS_ON_NODE": "4"
    }, (4, "SLURM_GPUS_ON_NODE=4", False)),
    ({
        "SLURM_GPUS_PER_NODE": "2"
    }, (2, "SLURM_GPUS_PER_NODE=2", False)),
    ({
        "SLURM_GPUS_PER_NODE": "a100:1,v100:2"
    }, (3, "SLURM_GPUS_PER_NODE=a100:1,v100:2", False)),
    ({
        "SLURM_JOB_GPUS": "0,1,4-5"
    }, (4, "SLURM_JOB_GPUS=0,1,4-5", False)),
    ({
        "SLURM_GPUS_PER_TASK": "1",
        "SLURM_GPUS_ON_NODE": "4"
    }, (1, "SLURM_GPUS_PER_TASK=1", True)),
])
def test_gpus_requested(env, expected):
    assert doctor.gpus_requested(env) == expected


@pytest.mark.parametrize("cvd,seen", [("", 0), ("NoDevFiles", 0), ("-1", 0), ("0,1,2", 3),
                                      ("0,-1,2", 1)])
def test_gpus_seen_from_cuda_visible_devices(cvd, seen, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(fake_nvidia_smi(tmp_path / "bin", 8)))
    assert doctor.gpus_seen({"CUDA_VISIBLE_DEVICES": cvd})[0] == seen


def test_gpus_shared_by_the_tasks_of_a_node(tmp_path, monkeypatch):
    # 2 tasks per node, each bound to 1 of the node's 2 GPUs: as requested.
    monkeypatch.setenv("PATH", str(fake_nvidia_smi(tmp_path / "bin", 2)))
    env = {"SLURM_JOB_ID": "1", "SLURM_GPUS_ON_NODE": "2", "CUDA_VISIBLE_DEVICES": "1"}
    assert doctor.check_gpus(env, local_tasks=2).status == doctor.OK
    assert doctor.check_gpus(env, local_tasks=1).status == doctor.PROBLEM


def test_other_node_resolving_to_loopback_is_a_problem():
    cluster = detect(step(0, "node1", nodelist="node[1-2]", ntasks=2, tpn="1(x2)"))

    def resolve(host, port):
        address = "127.0.1.1" if host == "node2" else "10.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 0))]

    result = doctor.check_hosts(cluster, resolve=resolve)
    # Every task on this machine (all names loopback) is not a problem.
    assert doctor.check_hosts(cluster, resolve=lambda host, port: resolve("node2", port)).status \
        == doctor.OK
    assert result.line() == (
        "PROBLEM  hosts: node2 resolve(s) to a loopback address on node1, so this task would "
        "connect to itself instead of that node. Fix the node's entry in /etc/hosts (or DNS) to "
        "its network address.")


def test_node_local_model_dir_on_several_nodes_is_a_warning():
    assert doctor.check_model_dir("/tmp", multi_node=False).status == doctor.OK
    result = doctor.check_model_dir("/tmp", multi_node=True)
    assert result.status == doctor.WARN and "node-local" in result.message


TF_OK = {"tensorflow": "2.18.1", "tf_keras": "2.18.0", "tf_gpus": 0}
# The TensorFlow of the venv under test (2.18 for make test, the newest for make test-newest).
TF_MINOR = ".".join(version("tensorflow").split(".")[:2])


@pytest.mark.parametrize("probe,strategy,status,text", [
    (dict(TF_OK, horovod="0.28.1", gloo=True,
          mpi=False), "horovod", "ok", "Horovod 0.28.1 imports (gloo yes, MPI no, NCCL no)"),
    (dict(TF_OK, horovod="0.28.1", gloo=True, mpi=False,
          nccl=21602), "horovod", "ok", "Horovod 0.28.1 imports (gloo yes, MPI no, NCCL yes)"),
    (dict(TF_OK, horovod_missing=True), "horovod", "PROBLEM",
     "Horovod is not installed, but --strategy=horovod needs it. Install it with `make horovod`"),
    (dict(TF_OK, horovod_missing=True), "multi_worker", "info",
     "not installed (only --strategy=horovod needs it)"),
    (dict(TF_OK, horovod_error="ImportError: undefined symbol: _ZN10tensorflow"), "multi_worker",
     "info", "does not import (only --strategy=horovod needs it): ImportError: undefined symbol"),
    (dict(TF_OK, horovod_error="ImportError: undefined symbol: _ZN10tensorflow"), "horovod",
     "PROBLEM", "Cannot import horovod.tensorflow.keras (ImportError: undefined symbol: "
     "_ZN10tensorflow). Install it with `make horovod`"),
    (dict(TF_OK, horovod="0.28.1", gloo=False, mpi=True), "horovod", "warn", "built without gloo"),
    ({
        "tensorflow_error": "ImportError: x"
    }, "horovod", "skip", "TensorFlow did not load"),
])
def test_check_horovod(probe, strategy, status, text):
    result = doctor.check_horovod(probe, strategy)
    assert result.status == status and text in result.message


@pytest.mark.parametrize("probe,gpus,status,text", [
    (TF_OK, 0, "ok", "TensorFlow 2.18.1, tf.keras is tf-keras 2.18.0, 0 GPU(s) in TensorFlow"),
    (dict(TF_OK, tf_dot_keras="Keras 3.15.1"), 0, "ok", "TensorFlow 2.18.1, tf.keras is Keras "
     "3.15.1 (tf-keras 2.18.0 beside it), 0 GPU(s) in TensorFlow"),
    (dict(TF_OK, tf_keras="2.19.0"), 0, "warn", "pip install 'tf-keras~=2.18.0'"),
    (TF_OK, 4, "warn", "TensorFlow sees 0 of the 4 GPU(s) this task has"),
    (TF_OK, 4, "warn", "pip install 'tensorflow[and-cuda]~=2.18.0'"),
    (dict(TF_OK, tensorflow="2.21.0", tf_keras="2.21.0"), 0, "ok", "TensorFlow 2.21.0"),
    (dict(TF_OK, tensorflow="2.15.1",
          tf_keras="2.15.1"), 0, "warn", "tested with TensorFlow 2.16-2.21"),
    ({
        "probe_error": "python exited with status -11 while importing tfdist and TensorFlow (x)"
    }, 0, "PROBLEM", "status -11"),
])
def test_check_tensorflow(probe, gpus, status, text):
    result = doctor.check_tensorflow(probe, gpus)
    assert result.status == status and text in result.message


KERAS3 = dict(TF_OK,
              tf_dot_keras="Keras 3.15.1",
              keras3="3.15.1",
              keras3_unknown=[],
              keras3_sums_replicas=False)


@pytest.mark.parametrize("probe,status,text", [
    (KERAS3, "ok", "Keras 3.15.1: tfdist's corrections were run on its code"),
    (dict(KERAS3, keras3="3.7.0", keras3_sums_replicas=True), "warn",
     "Keras 3.7.0: it adds up the gradients of several replicas"),
    (dict(KERAS3, keras3="3.7.0",
          keras3_sums_replicas=True), "warn", "Fix: pip install 'keras==3.15.1'"),
    (dict(KERAS3, keras3="3.0.5", keras3_sums_replicas=True, keras3_checkpoints=False), "warn",
     "averaging them (Keras averages from 3.8 on), so tfdist stops model.fit under several "
     "replicas (`mirrored` on several devices, `multi_worker`); tf.train.Checkpoint cannot save "
     "its optimizers (it can from Keras 3.1 on)"),
    (dict(KERAS3, keras3="3.16.0", keras3_unknown=["reduce_per_replica"]), "warn",
     "were not run on its `keras.src.backend.tensorflow.trainer.reduce_per_replica`, so a "
     "Keras 3 model stops with KerasCorrectionUnknown"),
    (dict(KERAS3, keras3="3.4.1", keras3_sums_replicas=True,
          tf_dot_keras="tf-keras 2.16.0"), "info",
     "tf.keras is tf-keras here (TF_USE_LEGACY_KERAS=1), whose models are not affected; for "
     "Keras 3 models: pip install 'keras==3.15.1'"),
    (dict(TF_OK), "info", "Keras 3 is not installed"),
    (dict(TF_OK, keras3_error="ImportError: x"), "warn", "Keras 3 does not import: ImportError"),
    ({
        "tensorflow_error": "ImportError: x"
    }, "skip", "TensorFlow did not load"),
])
def test_check_keras3(probe, status, text):
    result = doctor.check_keras3(probe)
    assert result.status == status and text in result.message, result.message


# --- with TensorFlow loaded in doctor's child process ----------------------------------------


@pytest.mark.slow
def test_tensorflow_and_horovod_load(tmp_path):
    r = run_doctor({}, "--strategy=horovod", f"--model_dir={tmp_path}", timeout=300)
    [tf_line] = lines(r, "tensorflow")
    assert tf_line.startswith(f"ok       tensorflow: TensorFlow {TF_MINOR}."), r.stdout
    # TensorFlow's default, as a user's shell has it: tf.keras is Keras 3, tf-keras beside it.
    assert f"tf.keras is Keras {version('keras')} (tf-keras {TF_MINOR}." in tf_line, tf_line
    # The Keras 3 of both stacks' locks: its code is what the corrections were run on.
    assert lines(r, "keras") == [
        f"ok       keras: Keras {version('keras')}: tfdist's corrections were run on its "
        "code; Keras 3 models train under every strategy"
    ], r.stdout
    [hvd_line] = lines(r, "horovod")
    if "horovod_missing" in hvd_line or "not installed" in hvd_line:
        assert r.returncode == 1 and hvd_line.startswith("PROBLEM  horovod: Horovod is not")
        cannot_run("Horovod is not installed", "`make horovod` builds and installs it")
    assert hvd_line.startswith("ok       horovod: Horovod 0.28."), r.stdout
    assert r.returncode == 0, r.stdout


@pytest.mark.slow
def test_tf_keras_missing(tmp_path):
    # tf-keras shadowed by a package that fails to import, as a missing or broken install does.
    (tmp_path / "tf_keras").mkdir()
    (tmp_path / "tf_keras" /
     "__init__.py").write_text("raise ImportError('tf-keras hidden by test_doctor')\n")
    r = run_doctor({}, "--skip=hosts", pythonpath=tmp_path, timeout=300)
    assert r.returncode == 1
    [line] = lines(r, "tensorflow")
    assert line.startswith("PROBLEM  tensorflow: TensorFlow with tf-keras does not load: "
                           "ImportError: tf-keras hidden by test_doctor."), r.stdout
    assert line.endswith("tfdist needs TensorFlow 2.16-2.21 with the tf-keras of the same minor: "
                         "pip install 'tensorflow~=2.18.0' 'tf-keras~=2.18.0' (tfdist's default), "
                         "or pip install tfdist beside your TensorFlow.")


@pytest.mark.slow
def test_keras_3_loaded_before_tfdist(tmp_path):
    # A site hook that imports TensorFlow with Keras 3 before any user code (and so before
    # tfdist); it acts only in doctor's `python -m` child, not in the tfdist command. The Keras
    # is the user's: reported, not refused.
    (tmp_path / "sitecustomize.py").write_text("import os, sys\n"
                                               "if sys.argv[:1] == ['-m']:\n"
                                               "    os.environ.pop('TF_USE_LEGACY_KERAS', None)\n"
                                               "    import tensorflow as tf\n"
                                               "    tf.keras.Model\n")
    r = run_doctor({}, "--skip=hosts", pythonpath=tmp_path, timeout=300)
    [line] = lines(r, "tensorflow")
    assert line.startswith(f"ok       tensorflow: TensorFlow {TF_MINOR}."), r.stdout
    assert "tf.keras is Keras 3." in line and f"(tf-keras {TF_MINOR}." in line, line


@pytest.mark.slow
def test_broken_horovod_with_strategy_horovod(tmp_path):
    (tmp_path / "horovod").mkdir()
    (tmp_path / "horovod" / "__init__.py"
     ).write_text("raise ImportError('undefined symbol: _ZN10tensorflow8OpKernel (test_doctor)')\n")
    r = run_doctor({}, "--strategy=horovod", "--skip=hosts", pythonpath=tmp_path, timeout=300)
    assert r.returncode == 1
    assert lines(r, "tensorflow")[0].startswith(f"ok       tensorflow: TensorFlow {TF_MINOR}.")
    assert lines(r, "horovod") == [
        "PROBLEM  horovod: Cannot import horovod.tensorflow.keras (undefined symbol: "
        "_ZN10tensorflow8OpKernel (test_doctor)). " + INSTALL_HINT
    ]


# --- on the real two-node test Slurm cluster ------------------------------------------------


@pytest.mark.slurm
@pytest.mark.slow
def test_doctor_in_a_real_batch_job(slurm, jobdir):  # noqa: F811
    # Under srun every task finds its role, port, both node names and the shared run directory;
    # in the batch script itself (no srun) doctor says that the step is missing and fails.
    checks = f"--strategy=multi_worker --model_dir={jobdir}/run --skip=tensorflow --skip=horovod"
    script = (f"srun --label {TFDIST} doctor {checks} > srun.out 2>&1; echo $? > srun.rc\n"
              f"{TFDIST} doctor {checks} > batch.out 2>&1; echo $? > batch.rc\n")
    job = slurm.sbatch(script, "--nodes=2", "--ntasks-per-node=1", workdir=jobdir)
    assert job.state == "COMPLETED", job.describe()
    out = job.read("srun.out")
    assert job.read("srun.rc").strip() == "0", out
    for rank, node in enumerate(("tfdist-node1", "tfdist-node2")):
        mine = [
            line[len(f"{rank}: "):] for line in out.splitlines() if line.startswith(f"{rank}: ")
        ]
        assert mine[0].startswith(f"ok       cluster: slurm, job {job.job_id}: rank {rank} of 2 "
                                  f"on {node} (node {rank + 1} of 2"), out
        assert mine[1].startswith("ok       port: ") and f"free on {node} (rank {rank})" in mine[1]
        assert mine[2] == "ok       hosts: 2 node name(s) resolve: tfdist-node1, tfdist-node2"
        assert mine[3].startswith("info     network: 2 nodes: every task runs TensorFlow's gRPC "
                                  "server"), out
        # The test cluster's nodes share this machine's /tmp; on a real cluster it is not shared.
        assert mine[5].startswith(f"warn     model_dir: {jobdir}/run will be created in {jobdir} "
                                  "(writable), but it is under /tmp, which is usually node-local")
        assert mine[-1].startswith("tfdist doctor: no problems")
    batch = job.read("batch.out")
    assert job.read("batch.rc").strip() == "1", batch
    assert "PROBLEM  cluster: " in batch and "outside any srun step" in batch
