"""Keras 3's LossScaleOptimizer (mixed_float16) with several replicas: when one replica's gradients
overflow, every replica skips the step (tfdist.keras_compat.loss_scale); Keras alone decides on each
replica's own gradients. Horovod's counterpart: tests/horovod/test_horovod_keras3.py."""

import json
from pathlib import Path

import pytest

from tests.helpers import PYTHON, WAIT, assert_one_skipped_step, launch, run

HERE = Path(__file__).parent
SCRIPT = str(HERE / "mixed_script.py")
OVERFLOW_STEP, STEPS = 2, 6  # as in mixed_script.py


def results(proc, tmp_path, n):
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(n)]


@pytest.mark.slow
@pytest.mark.newest
def test_multi_worker_ranks_skip_the_step_that_overflows_on_one_rank(tmp_path):
    r0, r1 = results(launch(2, PYTHON, SCRIPT, "fit", tmp_path, timeout=WAIT), tmp_path, 2)
    for r in (r0, r1):
        assert r["optimizer"] == "LossScaleOptimizer"
        assert_one_skipped_step(r, OVERFLOW_STEP, STEPS)
    assert r0["kernels"] == r1["kernels"] and r0["weights"] == r1["weights"]


@pytest.mark.slow
@pytest.mark.newest
def test_mirrored_replicas_skip_the_step_that_overflows_on_one_replica(tmp_path):
    """Keras alone decides on the first replica's gradients and applies replica 1's inf: the
    weights become nan (measured with `mixed_script.py mirrored_without`)."""
    [result] = results(run([PYTHON, SCRIPT, "mirrored", tmp_path], timeout=WAIT), tmp_path, 1)
    assert result["optimizer"] == "LossScaleOptimizer"
    assert_one_skipped_step(result, OVERFLOW_STEP, STEPS)


@pytest.mark.slow
@pytest.mark.newest
@pytest.mark.parametrize(
    "mode,decisions",
    [
        ("check", [False, False]),
        # Keras's own decision differs between the ranks: rank 0 would enter the gradient
        # all-reduce, rank 1 skip it (the job hung, measured on Keras 3.15.1).
        ("check_without", [True, False]),
    ])
def test_the_decision_is_every_ranks_only_with_the_correction(mode, decisions, tmp_path):
    found = results(launch(2, PYTHON, SCRIPT, mode, tmp_path, timeout=WAIT), tmp_path, 2)
    assert [r["finite"] for r in found] == decisions


def test_an_unknown_keras_is_refused_under_several_replicas_only(monkeypatch):
    import tensorflow as tf

    from tfdist.keras_compat.loss_scale import agreed_check_finite
    from tfdist.keras_compat.multi_worker import KerasCorrectionUnknown

    check = agreed_check_finite(lambda self, grads: tf.constant(True), False, "3.99.0")
    assert bool(check(None, [tf.constant(1.0)]))  # one replica: Keras's own check
    replicas = type("ReplicaContext", (), {"num_replicas_in_sync": 2})()
    monkeypatch.setattr(tf.distribute, "get_replica_context", lambda: replicas)
    with pytest.raises(KerasCorrectionUnknown, match=r"Keras 3\.99\.0 changed .*keras==3\.15\.1"):
        check(None, [tf.constant(1.0)])


def test_the_installed_keras_is_one_the_correction_knows():
    import keras

    from tfdist.keras_compat.known_sources import RUN, source_hash

    lso = keras.optimizers.LossScaleOptimizer
    assert lso.check_finite._tfdist_loss_scale  # applied on import
    originals = {"check_finite": lso.check_finite.__wrapped__, "_tf_apply": lso._tf_apply}
    for name, function in originals.items():
        assert source_hash(function) in RUN[f"LossScaleOptimizer.{name}"], name
