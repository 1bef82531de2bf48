"""Keras 3 models under MultiWorkerMirroredStrategy: keras_compat.multi_worker's two corrections,
applied whatever the order of `import keras` and `import tfdist`, each shown to be needed, and
refused (never patched blindly) on a Keras whose corrected code changed."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import launch

HERE = Path(__file__).parent
SCRIPT = str(HERE / "mw_script.py")
ENV = "tfdist env --strategy=multi_worker --format=shell"


def run_script(tmp_path, *args):
    """mw_script.py on 2 workers with `tfdist env`'s TF_CONFIG; (process, per-rank results)."""
    bindir = Path(sys.executable).parent
    command = f'eval "$({bindir}/{ENV})" && exec {sys.executable} {SCRIPT} ' + " ".join(
        [*args[:1], str(tmp_path), *args[1:]])
    proc = launch(2, "bash", "-c", command, timeout=420)
    results = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank-*.json"))]
    return proc, results


@pytest.mark.slow
@pytest.mark.newest
@pytest.mark.parametrize("order", ["tfdist_first", "keras_first"])
def test_fit_evaluate_predict_on_two_workers(order, tmp_path):
    proc, results = run_script(tmp_path, order)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(results) == 2
    a, b = results
    assert a["loss"] == b["loss"] and a["eval"] == b["eval"]  # reduced over both workers
    assert a["loss"][1] < a["loss"][0]
    assert np.shape(a["predictions"]) == (40, 2)
    np.testing.assert_allclose(a["predictions"], b["predictions"], rtol=1e-6)
    for wa, wb in zip(a["weights"], b["weights"]):
        np.testing.assert_array_equal(wa, wb)


@pytest.mark.slow
@pytest.mark.newest
@pytest.mark.parametrize("correction,error", [
    ("symbolic_build_from_local_spec", "Attempt to convert a value (PerReplica"),
    ("reduce_metrics_leaf_by_leaf", "Invalid reduction dimension 0 for input with 0 dimensions"),
])
def test_each_correction_is_needed(correction, error, tmp_path):
    proc, results = run_script(tmp_path, "tfdist_first", correction)
    assert proc.returncode != 0 and not results
    assert error in proc.stdout + proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_a_changed_keras_function_is_refused_in_multi_worker_mode_only():
    from tfdist.keras_compat.multi_worker import (KerasCorrectionUnknown,
                                                  reduce_metrics_leaf_by_leaf,
                                                  symbolic_build_from_local_spec)

    def reduce_per_replica(values, strategy, reduction):  # not Keras's: an unknown source
        return ("keras's own", values)

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        return "keras's own"

    for multi_worker in (False, True):
        reduce = reduce_metrics_leaf_by_leaf(reduce_per_replica, lambda s: multi_worker, "3.99.0")
        build = symbolic_build_from_local_spec(_maybe_symbolic_build, lambda s: multi_worker,
                                               "3.99.0")
        model = type("Model", (), {"_distribute_strategy": object()})()
        if not multi_worker:
            assert reduce(1, None, "auto") == ("keras's own", 1)
            assert build(model, iterator=iter(())) == "keras's own"
            continue
        assert reduce(1, None, "concat") == ("keras's own", 1)  # not corrected: Keras's own
        with pytest.raises(KerasCorrectionUnknown,
                           match=r"Keras 3\.99\.0 changed `keras\.src\."
                           r"backend\.tensorflow\.trainer\.reduce_per_replica`.*keras==3\.15\.1"):
            reduce(1, None, "auto")
        with pytest.raises(KerasCorrectionUnknown, match="_maybe_symbolic_build"):
            build(model, iterator=iter(()))


def test_the_installed_keras_is_one_the_corrections_know():
    """The stacks under test run Keras versions whose corrected code tfdist has measured."""
    import keras.src.backend.tensorflow.trainer as trainer

    from tfdist.keras_compat.known_sources import RUN, source_hash

    assert trainer.reduce_per_replica._tfdist_keras3_correction  # applied on import
    originals = {
        "TensorFlowTrainer._maybe_symbolic_build":
        trainer.TensorFlowTrainer._maybe_symbolic_build.__wrapped__,
        "reduce_per_replica": trainer.reduce_per_replica.__wrapped__,
    }
    for name, function in originals.items():
        assert source_hash(function) in RUN[name], name
