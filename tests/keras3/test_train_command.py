"""`tfdist train --keras=3` under the strategies of the Horovod and parameter-server half:
the bundled model built with Keras 3 trains through `tfdist launch`."""

import json

import pytest

from tests.helpers import TFDIST, WAIT, launch, reached, requires_horovod

pytestmark = pytest.mark.slow


def train(n, tmp_path, *flags):
    model_dir = tmp_path / "run"
    r = launch(n,
               TFDIST,
               "train",
               "--keras=3",
               "--pipeline=digits",
               f"--model_dir={model_dir}",
               *flags,
               env={"TFDIST_VERBOSE": "1"},
               timeout=WAIT)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    return r, json.loads((model_dir / "metrics.json").read_text())


# Both on the default stack only: on every stack the same Keras 3 paths run from users' own scripts
# (tests/horovod/test_horovod_keras3.py, tests/keras3/test_parameter_server.py); what these add is
# tfdist train's own flags.
@requires_horovod
@pytest.mark.horovod
@pytest.mark.default_stack
def test_horovod(tmp_path):
    _, metrics = train(2, tmp_path, "--strategy=horovod", "--epochs=6")
    assert (metrics["keras"], metrics["strategy"], metrics["world_size"]) == (3, "horovod", 2)
    # 0.989 (356 of 360) in each of 2 runs here (2026-11-26); 0.95 leaves 14 samples.
    assert reached(metrics["final"]["test_accuracy"], 0.95), metrics["final"]


@pytest.mark.default_stack
def test_parameter_server_with_the_evaluator(tmp_path):
    """Chief + ps + worker train; the evaluator (task 3) follows the chief's checkpoints."""
    r, metrics = train(4, tmp_path, "--strategy=parameter_server", "--evaluator", "--epochs=6",
                       "--optimizer=adam", "--lr=0.001")
    assert (metrics["keras"], metrics["strategy"]) == (3, "parameter_server")
    # 0.958 (345 of 360) in each of 2 runs here (2026-11-26): 0.95 (342) leaves only 3 samples,
    # a thin margin for an asynchronous run; kept, not lowered, until a run says otherwise.
    assert reached(metrics["final"]["test_accuracy"], 0.95), metrics["final"]
    assert metrics["samples_per_sec"] > 0  # counted in the steps, on the workers
    line = next(x for x in r.stdout.splitlines() if x.startswith("[3] tfdist train: evaluations "))
    last = json.loads(line.split("evaluations ", 1)[1])[-1]
    assert (last["epoch"], last["global_step"]) == (6, 6 * metrics["steps_per_epoch"])
    assert last["metrics"]["accuracy"] == pytest.approx(metrics["final"]["test_accuracy"], abs=1e-6)
