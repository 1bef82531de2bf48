"""Keras 3 models (`import keras`) under Horovod: real ranks set up as `tfdist launch` sets them."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import assert_one_skipped_step, clean_environ, free_port_base, requires_horovod
from tests.horovod.helpers import HERE, finish, start_task

pytestmark = [pytest.mark.horovod, pytest.mark.slow, requires_horovod]

WORKER = "hvd_keras3_worker.py"


def run_pair(tmp_path, mode):
    port = free_port_base(2)
    outs = [tmp_path / f"{mode}-{rank}.json" for rank in range(2)]
    procs = [start_task(mode, outs[r], rank=r, port=port, worker=WORKER) for r in range(2)]
    for rank, (code, out, _) in enumerate(finish(procs, timeout=300)):
        assert code == 0, f"rank {rank} exited {code}:\n{out[-4000:]}"
    return [json.loads(o.read_text()) for o in outs]


def assert_weights_close(a, b, rtol):
    assert len(a) == len(b)
    for wa, wb in zip(a, b):
        np.testing.assert_allclose(np.array(wa), np.array(wb), rtol=rtol, atol=1e-7)


@pytest.mark.newest
def test_rt_optimizer_averages_and_the_engine_callbacks_broadcast(tmp_path):
    r0, r1 = run_pair(tmp_path, "train")
    assert (r0["rank"], r1["rank"], r0["size"]) == (0, 1, 2)
    assert r0["optimizer_class"] == "SGD"  # same class name: saved models load without Horovod
    assert not np.allclose(np.array(r0["initial_weights"][0]), np.array(r1["initial_weights"][0]))
    assert_weights_close(r0["weights"], r1["weights"], rtol=1e-6)
    for key in ("loss", "mae"):  # MetricAverageCallback
        np.testing.assert_allclose(r0["history"][key], r1["history"][key], rtol=1e-6)
    assert r0["history"]["loss"][-1] < r0["history"]["loss"][0]


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param("train0", marks=pytest.mark.newest),
        # Keras's gradient_accumulation_steps (what replaces Horovod's backward_passes_per_step for
        # Keras 3): each update averages the steps' averaged gradients, as one worker's does.
        "accum",
    ])
def test_two_ranks_do_the_math_of_one_worker_with_the_global_batch(mode, tmp_path):
    pair = run_pair(tmp_path, mode)
    out = tmp_path / "single.json"
    single_mode = "single_accum" if mode == "accum" else "single"
    [(code, log, _)] = finish([start_task(single_mode, out, worker=WORKER)], timeout=300)
    assert code == 0, log[-4000:]
    single = json.loads(out.read_text())
    for r in pair:
        assert_weights_close(r["weights"], single["weights"], rtol=1e-5)
        np.testing.assert_allclose(r["history"]["loss"], single["history"]["loss"], rtol=1e-5)


@pytest.mark.newest
def test_horovods_own_keras_api_with_keras3_objects(tmp_path):
    r0, r1 = run_pair(tmp_path, "hvd_api")
    assert_weights_close(r0["weights"], r1["weights"], rtol=1e-6)
    np.testing.assert_allclose(r0["history"]["loss"], r1["history"]["loss"], rtol=1e-6)
    # LearningRateWarmupCallback: lr/size at the first batch, rising each batch to lr after
    # warmup_epochs=2 (6 batches an epoch), then left alone; logged as "lr" each epoch.
    lrs = r0["lrs"]
    assert lrs == r1["lrs"] and len(lrs) == 18
    assert lrs[0] == pytest.approx(0.1 / 2 * (1 + 1 / 6 / 2), rel=1e-5)
    assert all(a < b for a, b in zip(lrs[:12], lrs[1:12]))
    assert lrs[12:] == [pytest.approx(0.1)] * 6
    assert r0["history"]["lr"][-1] == pytest.approx(0.1)
    assert (tmp_path / "ckpt.keras").exists()  # rank 0's ModelCheckpoint


def test_custom_loop_apply_gradients_is_averaged(tmp_path):
    r0, r1 = run_pair(tmp_path, "loop")
    assert_weights_close(r0["weights"], r1["weights"], rtol=1e-6)


def test_mixed_precision_skips_the_same_steps_on_every_rank(tmp_path):
    """Rank 1 alone overflows in one step: both ranks must skip it (the loss scale halves on
    both, the weights stay) and keep identical weights; a rank-local finiteness check would
    deadlock here."""
    from tests.horovod.hvd_keras3_worker import OVERFLOW_STEP, STEPS

    r0, r1 = run_pair(tmp_path, "mixed")
    assert r0["optimizer_class"] == "LossScaleOptimizer"
    for r in (r0, r1):
        assert_one_skipped_step(r, OVERFLOW_STEP, STEPS)
    assert_weights_close(r0["weights"], r1["weights"], rtol=1e-6)


def test_the_keras3_optimizer_refuses_what_it_cannot_do():
    code = """
import tfdist, keras, pytest
import horovod.tensorflow.keras as hvd
from tfdist.keras_compat.horovod import HorovodKeras3Error
hvd.init()
with pytest.raises(HorovodKeras3Error, match="gradient_accumulation_steps=2"):
    hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=2)
opt = keras.optimizers.SGD(0.1)
opt.build([keras.Variable(1.0)])
with pytest.raises(HorovodKeras3Error, match="wrap it with DistributedOptimizer before"):
    hvd.DistributedOptimizer(opt)
print("OK")
"""
    proc = subprocess.run([sys.executable, "-c", code],
                          cwd=HERE,
                          env=clean_environ(CUDA_VISIBLE_DEVICES=""),
                          capture_output=True,
                          text=True,
                          timeout=300)
    assert proc.stdout.strip().endswith("OK"), proc.stdout[-2000:] + proc.stderr[-3000:]
