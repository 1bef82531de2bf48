"""A user's own Keras script with tfdist's callbacks (jobs/examples/keras_digits.py: its own
model.fit with rt.resume, rt.dataset and rt.callbacks(model_dir=...)) on 2 workers: stopped by
SIGTERM mid-epoch it checkpoints and exits 75; re-run, it ends with the same weights as a run that
was never stopped."""

import os
import re
import signal

import numpy as np
import pytest

from tests.helpers import PYTHON, REPO, TFDIST, finish, requires_horovod, run, start, wait_for
from tfdist.train.preemption import PAUSE_AFTER_STEP

pytestmark = pytest.mark.slow
SCRIPT = REPO / "jobs" / "examples" / "keras_digits.py"

STEPS = 89  # an epoch: 1437 training digits, 8 per replica, 2 replicas


def command(strategy, model_dir):
    return [
        TFDIST, "launch", "-n", "2", f"--strategy={strategy}", "--", PYTHON, SCRIPT, "--epochs=3",
        "--batch_size=8", f"--model_dir={model_dir}"
    ]


def last_checkpoint(model_dir):
    """The newest checkpoint's meta.json and its model variables."""
    import tfdist  # noqa: F401
    import tensorflow as tf

    from tfdist.train.checkpoint import latest

    path, meta = latest(str(model_dir))
    state = os.path.join(path, "state")
    names = [name for name, _ in tf.train.list_variables(state) if name.startswith("model/")]
    reader = tf.train.load_checkpoint(state)
    return meta, {name: reader.get_tensor(name) for name in names}


@pytest.mark.parametrize(
    "strategy",
    ["multi_worker",
     pytest.param("horovod", marks=[requires_horovod, pytest.mark.horovod])])
def test_stopped_user_script_resumes_to_the_same_weights(strategy, tmp_path):
    stopped, straight = tmp_path / "stopped", tmp_path / "straight"
    # Both workers wait after 40 steps of epoch 2 (the test hook) until the signal comes.
    pause = STEPS + 40
    proc = start(command(strategy, stopped), env={PAUSE_AFTER_STEP: str(pause)})
    head = wait_for(proc, f"{PAUSE_AFTER_STEP}={pause}: paused")
    proc.send_signal(signal.SIGTERM)  # launch passes it on to both workers
    status, out = finish(proc)
    out = head + out
    assert status == 75, out[-3000:]
    # Both stopped after the same step of epoch 2, at their next agreement or the epoch's end.
    assert re.search(r"\[0\] tfdist: warning: preempted (at epoch 2, step \d+|after epoch 2);",
                     out), out[-3000:]
    assert "[1] tfdist: warning: preempted" in out
    assert not (stopped / "metrics.json").exists() and "keras_digits:" not in out

    resumed = run(command(strategy, stopped))
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    # The checkpoint counts epochs done: "epoch 1, step 50" is 50 steps into the second.
    assert re.search(r"\[0\] tfdist: resuming from \S+/ckpt-\d+ \(epoch [12], step \d+\)",
                     resumed.stdout), resumed.stdout[-3000:]
    never = run(command(strategy, straight))
    assert never.returncode == 0, never.stdout[-3000:]

    (meta_a, weights_a), (meta_b, weights_b) = last_checkpoint(stopped), last_checkpoint(straight)
    assert (meta_a["epoch"], meta_a["global_step"]) == (meta_b["epoch"], meta_b["global_step"])
    assert weights_a.keys() == weights_b.keys() and len(weights_a) >= 8
    for name in weights_a:
        np.testing.assert_allclose(weights_a[name], weights_b[name], rtol=1e-5, atol=1e-6)
    assert "keras_digits:" in resumed.stdout
