"""`tfdist plan`: its numbers from the built model, and its activation estimate against what
TensorFlow measures on this machine's CPU (the factor stated in docs/planning.md)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tfdist.app.memory import CPU_PEAK_FACTOR

TFDIST = str(Path(sys.executable).parent / "tfdist")

# Each plan imports TensorFlow and builds a model in a process; the factors it checks were measured
# on the default stack (bench/results/plan).
pytestmark = [pytest.mark.slow, pytest.mark.default_stack]
# The small CNN's bound (its workspace, below): 1.38x on an AVX-512 CPU, 8.2x on an AVX2-only one
# (2026-11-25), 1.19 and 1.22 on this one (2026-11-26). 12x leaves room for another CPU's kernels
# and still fails a plan whose estimate lost the weights or the activations.
CNN_WORKSPACE_FACTOR = 12


def plan(*args):
    r = subprocess.run([TFDIST, "plan", "--format=json", *args],
                       capture_output=True,
                       text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def test_resnet50_on_an_80GB_gpu():
    p = plan("--model=resnet50", "--input_shape=224,224,3", "--num_classes=1000",
             "--optimizer=adam", "--batch_size=64", "--gpu_memory=80GB", "--lr=0.1",
             "--replicas=1,4,16")
    m = p["memory"]
    assert m["params"] == p["count_params"] == 25_636_712  # Keras's ResNet-50 with a 1000-way top
    assert (m["weight_bytes"], m["slot_bytes"]) == (4 * m["params"], 8 * m["trainable_params"] + 8)
    for name, s in p["strategies"].items():
        fixed = m["weight_bytes"] + m["gradient_bytes"]
        if name not in ("parameter_server", "central_storage"):
            fixed += m["slot_bytes"]
        assert s["replica_bytes"] == fixed + 64 * m["activation_bytes_per_sample"]
        assert s["fits"] is True
        assert s["largest_batch"] == (80 * 10**9 - fixed) // m["activation_bytes_per_sample"]
    assert [(r["replicas"], r["global_batch_size"]) for r in p["replicas"]] == [(1, 64), (4, 256),
                                                                                (16, 1024)]
    assert [r["lr_linear"] for r in p["replicas"]] == pytest.approx([0.1, 0.4, 1.6])
    assert [r["lr_sqrt"] for r in p["replicas"]] == pytest.approx([0.1, 0.2, 0.4])


# The configurations closest to the stated bounds (of 32 measured: docs/planning.md), and resnet50.
@pytest.mark.parametrize("model,batch,optimizer", [("mlp", 32, "sgd"), ("cnn", 32, "adam"),
                                                   ("resnet_small", 256, "sgd"),
                                                   ("resnet50", 32, "sgd")])
def test_estimate_is_within_the_stated_factor_of_tensorflows_measured_peak(model, batch, optimizer):
    p = plan(f"--model={model}", f"--batch_size={batch}", f"--optimizer={optimizer}", "--measure")
    x = p["measured"]
    assert x["device"] == "CPU:0" and x["estimate_bytes"] == p["strategies"]["horovod"][
        "replica_bytes"]
    # The variables and slots are still in use after the step: what was measured is real.
    assert x["current_bytes"] >= p["memory"]["weight_bytes"] + p["memory"]["slot_bytes"]
    assert x["factor"] == pytest.approx(x["peak_bytes"] / x["estimate_bytes"])
    low, high = CPU_PEAK_FACTOR
    assert low <= x["factor"], x
    if model != "cnn":
        # The small CNN's convolutions take a workspace whose size depends on the CPU's kernels,
        # not on the model: 1.38x the estimate on an AVX-512 CPU (2026-11-23), 8.2x (37 MB against
        # 4.5 MB; 2.5x at batch 256) on an AVX2-only one, with oneDNN on or off (2026-11-25).
        assert x["factor"] <= high, x
    else:
        assert x["factor"] <= CNN_WORKSPACE_FACTOR, x
    print(f"{model} batch {batch} {optimizer}: measured/estimate {x['factor']:.2f}")
