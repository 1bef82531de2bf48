"""`tfdist env` as a user runs it: a subprocess with a faked Slurm or TF_CONFIG environment."""

import json
import os
import subprocess
import sys

import pytest

from tests.cluster.test_slurm import step
from tests.helpers import TFDIST, run


def run_env(env, *args):
    return run([TFDIST, "env", *args], env=env, timeout=60)


def test_json_in_a_slurm_step():
    r = run_env(step(3, "node2", SLURM_LOCALID=1), "--strategy=multi_worker", "--port=24000",
                "--nocheck_port")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert {
        k: info[k]
        for k in ("environment", "rank", "world_size", "local_rank", "local_world_size",
                  "node_rank", "nodes", "job_id")
    } == {
        "environment": "slurm",
        "rank": 3,
        "world_size": 4,
        "local_rank": 1,
        "local_world_size": 2,
        "node_rank": 1,
        "nodes": ["node1", "node2"],
        "job_id": "4242"
    }
    assert info["tf_config"] == {
        "cluster": {
            "worker": ["node1:24000", "node1:24001", "node2:24000", "node2:24001"]
        },
        "task": {
            "type": "worker",
            "index": 3
        }
    }
    assert info["horovod"] is None


def test_shell_format_can_be_evaluated():
    r = run_env(step(0, "node1"), "--strategy=horovod", "--format=shell", "--port=24000",
                "--nocheck_port")
    assert r.returncode == 0, r.stderr
    out = subprocess.run([
        "bash", "-c", r.stdout + '\necho "$HOROVOD_RANK/$HOROVOD_SIZE '
        '$HOROVOD_GLOO_RENDEZVOUS_ADDR:$HOROVOD_GLOO_RENDEZVOUS_PORT"'
    ],
                         capture_output=True,
                         text=True).stdout
    assert out.strip().splitlines()[-1] == "0/4 node1:24000"

    r = run_env(step(1, "node1"), "--strategy=multi_worker", "--format=shell", "--port=24000",
                "--nocheck_port")
    out = subprocess.run(["bash", "-c", r.stdout + '\necho "$TF_CONFIG"'],
                         capture_output=True,
                         text=True).stdout
    assert json.loads(out)["task"] == {"type": "worker", "index": 1}


@pytest.mark.parametrize("switch", ["0", "1", None])
def test_exports_keep_the_users_keras_switch(switch):
    """A script run after `eval` keeps the Keras its batch script chose: TensorFlow's switch
    (TF_USE_LEGACY_KERAS) is not exported, set or unset; the C++ log level only defaulted."""
    given = dict(step(1, "node1"), TF_CPP_MIN_LOG_LEVEL="3")
    if switch is not None:
        given["TF_USE_LEGACY_KERAS"] = switch
    r = run_env(given, "--strategy=multi_worker", "--format=shell", "--port=24000",
                "--nocheck_port")
    assert r.returncode == 0, r.stderr
    assert "TF_USE_LEGACY_KERAS" not in r.stdout
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
    env.update({"TF_USE_LEGACY_KERAS": switch} if switch is not None else {})
    out = subprocess.run(
        ["bash", "-c", r.stdout + '\necho "${TF_USE_LEGACY_KERAS-unset} $TF_CPP_MIN_LOG_LEVEL"'],
        env=env,
        capture_output=True,
        text=True).stdout
    assert out.strip().splitlines()[-1] == f"{switch or 'unset'} 3"
    r = run_env(step(1, "node1"), "--strategy=multi_worker", "--port=24000", "--nocheck_port")
    assert "TF_USE_LEGACY_KERAS" not in json.loads(r.stdout)["tf_environ"]


def test_single_process_without_any_environment():
    r = run_env({})
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert (info["environment"], info["world_size"], info["tf_config"]) == ("local", 1, None)


@pytest.mark.parametrize("env,args,message", [
    ({
        "SLURM_JOB_ID": "9",
        "SLURM_JOB_NODELIST": "node[1-2]",
        "SLURM_NTASKS": "4",
        "SLURM_TASKS_PER_NODE": "2(x2)",
        "SLURM_PROCID": "0"
    }, [], "outside any srun step"),
    (step(0, "node1", ntasks=4, tpn="2,1"), [], "adds up to 3 tasks, but the world size is 4"),
    (step(0, "node1"), ["--strategy=parameter_server", "--num_ps=3"], "needs at least 5 tasks"),
    ({
        "TF_CONFIG": "{oops"
    }, [], "TF_CONFIG is not valid JSON"),
    ({
        "TFDIST_PORT": "99999"
    }, ["--strategy=multi_worker"], "TFDIST_PORT=99999 is out of range"),
])
def test_errors_exit_non_zero_with_the_message(env, args, message):
    if "TFDIST_PORT" in env:
        env = dict(step(0, "node1"), **env)
    r = run_env(env, *args)
    assert r.returncode != 0
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_port_in_use_is_reported():
    import socket
    with socket.socket() as s:
        s.bind(("", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_env(step(0, "node1"), "--strategy=multi_worker", f"--port={port}")
    assert r.returncode != 0
    assert f"Port {port} on host node1 (rank 0) is already in use" in r.stderr


def test_bad_flag_values_fail_at_parse_time():
    r = run_env({}, "--strategy=ring")
    assert r.returncode != 0 and "--strategy=ring" in r.stderr


def test_help_lists_commands_and_flags():
    top = subprocess.run([TFDIST, "--help"], capture_output=True, text=True)
    assert top.returncode == 0 and "env" in top.stdout
    r = subprocess.run([TFDIST, "env", "--help"], capture_output=True, text=True)
    for flag in ("--strategy", "--num_ps", "--port", "--format"):
        assert flag in r.stdout
    bad = subprocess.run([TFDIST, "frobnicate"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown command 'frobnicate'" in bad.stderr


def test_env_imports_no_tensorflow():
    code = ("import sys; from tfdist.cli import main\n"
            "try:\n    main.run(['tfdist', 'env'])\nexcept SystemExit:\n    pass\n"
            "assert 'tensorflow' not in sys.modules, 'tfdist env imported TensorFlow'\n"
            "print('no-tf')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip().endswith("no-tf"), r.stderr


def test_gpus_in_json_and_shell_for_the_seed_layout():
    # --gres=gpu:2 --ntasks-per-node=2: both tasks of node2 see both GPUs; rank 3 takes GPU 1.
    seed = step(3,
                "node2",
                SLURM_LOCALID=1,
                CUDA_VISIBLE_DEVICES="0,1",
                SLURM_STEP_GPUS="0,1",
                SLURM_GPUS_ON_NODE=2)
    r = run_env(seed, "--strategy=horovod", "--port=24000", "--nocheck_port")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)["gpus"]
    assert (plan["use"], plan["summary"], plan["mechanism"]) == ([1], "GPU 1 of node",
                                                                 "set_visible_devices")
    # Shell: for a program started after eval, the variable itself narrows what CUDA shows.
    r = run_env(seed, "--strategy=horovod", "--format=shell", "--port=24000", "--nocheck_port")
    assert "# GPUs: GPU 1 of node" in r.stdout
    out = subprocess.run(["bash", "-c", r.stdout + '\necho "$CUDA_VISIBLE_DEVICES $TFDIST_GPUS"'],
                         capture_output=True,
                         text=True).stdout
    assert out.strip().splitlines()[-1] == "1 3:1"
    # ... and tfdist in that environment keeps it: this task's own GPU, the node's GPU 1.
    pinned = dict(seed, CUDA_VISIBLE_DEVICES="1", TFDIST_GPUS="3:1")
    r = run_env(pinned, "--strategy=horovod", "--port=24000", "--nocheck_port")
    plan = json.loads(r.stdout)["gpus"]
    assert (plan["use"], plan["summary"], plan["mechanism"]) == ([0], "GPU 1 of node", "none")


def test_a_layout_that_shares_a_gpu_is_an_error():
    three = step(2,
                 "node1",
                 nodelist="node1",
                 ntasks=3,
                 tpn="3",
                 SLURM_LOCALID=2,
                 CUDA_VISIBLE_DEVICES="0,1",
                 SLURM_GPUS_ON_NODE=2)
    r = run_env(three, "--strategy=horovod", "--port=24000", "--nocheck_port")
    assert r.returncode == 2
    assert "3 tasks on this node use GPUs but they see 2" in r.stderr
