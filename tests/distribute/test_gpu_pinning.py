"""tfdist.init() pins each task's GPUs before TensorFlow creates its devices.

This machine has no GPU: gpu_pin_script.py makes TensorFlow list stand-in GPUs and records the GPU
options TensorFlow hands its runtime when it creates the devices (see the script). That proves
the order and what TensorFlow is told; it does not prove where a real GPU runs the kernels.
"""

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.helpers import launch, requires_horovod, run

HERE = Path(__file__).parent

SCRIPT = str(HERE / "gpu_pin_script.py")
# What Slurm shows each task of `--gres=gpu:2 --ntasks-per-node=2`: both GPUs.
BOTH = {"CUDA_VISIBLE_DEVICES": "0,1"}


def results(r):
    lines = [line for line in r.stdout.splitlines() if "GPU_PIN " in line]
    assert lines, r.stdout[-3000:] + r.stderr[-3000:]
    found = [json.loads(line.split("GPU_PIN ", 1)[1]) for line in lines]
    return sorted(found, key=lambda f: f.get("rank", 0))


@pytest.mark.slow
@pytest.mark.horovod
@requires_horovod
def test_horovod_seed_layout_one_gpu_per_task_with_memory_growth():
    r = launch(2, sys.executable, SCRIPT, "horovod", "2", env=BOTH, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ranks = results(r)
    assert [f["told"] for f in ranks] == [{
        "visible_device_list": "0",
        "allow_growth": True
    }, {
        "visible_device_list": "1",
        "allow_growth": True
    }]
    assert [f["plan"]["summary"] for f in ranks] == ["GPU 0 of node", "GPU 1 of node"]


@pytest.mark.slow
def test_multi_worker_one_task_per_gpu_uses_nccl():
    r = launch(2, sys.executable, SCRIPT, "multi_worker", "2", env=BOTH, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ranks = results(r)
    assert [f["told"]["visible_device_list"] for f in ranks] == ["0", "1"]
    assert [f["collective"] for f in ranks] == ["nccl", "nccl"]  # what tfdist chose
    # ... and what TensorFlow's strategy was made with, the all-reduce it runs: NCCL.
    assert [f["implementation"] for f in ranks] == ["NCCL", "NCCL"], ranks


@pytest.mark.slow
def test_too_late_is_an_error_and_memory_growth_can_be_off():
    with ThreadPoolExecutor(2) as pool:  # the two processes side by side
        runs = [
            pool.submit(run, [sys.executable, SCRIPT, "one_device", "2", mode], env=BOTH)
            for mode in ("late", "nogrowth")
        ]
    late, fixed = (results(r.result())[0] for r in runs)
    assert late["error"].startswith("LateInitError: tfdist.init() must come before TensorFlow "
                                    "runs its first op: TensorFlow created its devices before "
                                    "tfdist could give this task GPU 0 of node")
    assert late["told"] == {"visible_device_list": "0,1", "allow_growth": False}

    assert fixed["told"] == {"visible_device_list": "0", "allow_growth": False}


def test_collective_auto_is_nccl_only_on_gpus():
    from tfdist.distribute.tf_strategies import collective_for

    assert collective_for("auto", uses_gpus=True) == "nccl"
    assert collective_for("auto", uses_gpus=False) == "ring"
    assert collective_for("ring", uses_gpus=True) == "ring"
    with pytest.raises(ValueError, match="--collective"):
        collective_for("hierarchical", uses_gpus=True)
