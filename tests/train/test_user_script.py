"""A user's own Keras script with tfdist's callbacks (jobs/examples/keras_digits.py: its own
model.fit with rt.resume, rt.dataset and rt.callbacks(model_dir=...); keras3_digits.py, the same
with Keras 3) on 2 workers: stopped by SIGTERM mid-epoch it checkpoints and exits 75; re-run, it
ends with the same weights as a run that was never stopped. Three runs of 2 workers a case (6
TensorFlow processes): the stopped one, its resume and the uninterrupted reference. Then Keras 3 on
one task under a strategy (three runs of one), resumed past a pass over its data."""

import os
import re
import signal

import numpy as np
import pytest

from tests.helpers import (PYTHON, REPO, TFDIST, finish, keras_environ, requires_horovod, run,
                           start, tf_keras_twin, wait_for)
from tfdist.train.preemption import PAUSE_AFTER_STEP

pytestmark = pytest.mark.slow
# By Keras: keras_digits.py trains tf.keras, tf-keras where its user exports the switch
# (keras_environ(2)); keras3_digits.py imports Keras 3.
SCRIPTS = {2: "keras_digits", 3: "keras3_digits"}

BATCH = 32  # per replica
STEPS = 22  # an epoch: 1437 training digits, 32 per replica, 2 replicas


def command(strategy, model_dir, keras=2, n=2):
    script = REPO / "jobs" / "examples" / f"{SCRIPTS[keras]}.py"
    return [
        TFDIST, "launch", "-n",
        str(n), f"--strategy={strategy}", "--", PYTHON, script, "--epochs=3",
        f"--batch_size={BATCH}", f"--model_dir={model_dir}"
    ]


# Where a checkpoint names the model's weights: TensorFlow names each variable by its shortest path
# from the root; a Keras 3 model's are reached first through its optimizer's trainable variables.
WEIGHTS = {2: "model/", 3: "optimizer/_trainable_variables/"}


def last_checkpoint(model_dir, keras=2):
    """The newest checkpoint's meta.json and its model variables."""
    import tfdist  # noqa: F401
    import tensorflow as tf

    from tfdist.train.checkpoint import latest

    path, meta = latest(str(model_dir))
    state = os.path.join(path, "state")
    names = [name for name, _ in tf.train.list_variables(state) if name.startswith(WEIGHTS[keras])]
    reader = tf.train.load_checkpoint(state)
    return meta, {name: reader.get_tensor(name) for name in names}


def stopped_at_pause(cmd, pause: int, env=None, paused: str = "paused") -> str:
    """Run `cmd` until every task waits at the test hook's step `pause`, send SIGTERM; its output
    after it ends with the preemption status 75."""
    proc = start(cmd, env={PAUSE_AFTER_STEP: str(pause), **(env or {})})
    head = wait_for(proc, f"{PAUSE_AFTER_STEP}={pause}: {paused}")
    proc.send_signal(signal.SIGTERM)  # launch passes it on to every task
    status, out = finish(proc)
    assert status == 75, (head + out)[-3000:]
    return head + out


def assert_same_end(stopped, straight, keras) -> dict:
    """The newest checkpoints of the stopped-and-resumed run and of the run never stopped: the
    same epoch and step count, the same weights. Returns the stopped run's meta."""
    (meta_a, weights_a), (meta_b, weights_b) = (last_checkpoint(stopped, keras),
                                                last_checkpoint(straight, keras))
    assert (meta_a["epoch"], meta_a["global_step"]) == (meta_b["epoch"], meta_b["global_step"])
    assert weights_a.keys() == weights_b.keys() and len(weights_a) >= 8
    for name in weights_a:
        np.testing.assert_allclose(weights_a[name], weights_b[name], rtol=1e-5, atol=1e-6)
    return meta_a


@pytest.mark.parametrize(
    "strategy,keras",
    [
        # tf-keras: tests.helpers.TF_KERAS_TWIN (its twin [multi_worker-3] runs on every stack).
        tf_keras_twin("multi_worker", 2),
        ("multi_worker", 3),
        pytest.param("horovod", 2, marks=[requires_horovod, pytest.mark.horovod]),
    ])
def test_stopped_user_script_resumes_to_the_same_weights(strategy, keras, tmp_path):
    stopped, straight = tmp_path / "stopped", tmp_path / "straight"
    # Both workers wait after 10 steps of epoch 2 (the test hook) until the signal comes.
    pause = STEPS + 10
    out = stopped_at_pause(command(strategy, stopped, keras), pause, keras_environ(keras))
    # Both stopped after the same step of epoch 2, at their next agreement or the epoch's end.
    assert re.search(r"\[0\] tfdist: warning: preempted (at step \d+ of epoch 2|after epoch 2);",
                     out), out[-3000:]
    assert "[1] tfdist: warning: preempted" in out
    assert not (stopped / "metrics.json").exists() and f"{SCRIPTS[keras]}:" not in out

    resumed = run(command(strategy, stopped, keras), env=keras_environ(keras))
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    # The checkpoint counts epochs done: "epoch 1, step 15" is 15 steps into the second.
    assert re.search(r"\[0\] tfdist: resuming from \S+/ckpt-\d+ \(epoch [12], step \d+\)",
                     resumed.stdout), resumed.stdout[-3000:]
    never = run(command(strategy, straight, keras), env=keras_environ(keras))
    assert never.returncode == 0, never.stdout[-3000:]

    assert_same_end(stopped, straight, keras)
    assert f"{SCRIPTS[keras]}:" in resumed.stdout


@pytest.mark.parametrize("strategy", ["multi_worker", "mirrored"])
def test_one_task_resumes_mid_epoch_past_its_datas_first_pass(strategy, tmp_path):
    """One task of Keras 3 under a strategy (a one-node `jobs/multi_worker.sbatch` job), not in
    multi-worker mode: stopped mid-epoch 2, its resume skips the batches of more than one pass
    over the shuffled, repeated data, and must train on the batches the uninterrupted run did.
    Before tfdist built the model from the dataset's element spec here too (2026-11-27), Keras's
    own symbolic build read a batch through an iterator of its own, which there skipped past the
    first pass and so drew one more reshuffle seed: the resume trained on other batches (weights
    0.07 apart, Keras 3.8.0 and 3.15.1)."""
    stopped, straight = tmp_path / "stopped", tmp_path / "straight"
    # One replica: 1437 training digits at 32 a step, 44 steps an epoch; a pass over the data is
    # 44.9 batches, so the 54 steps skipped on resume end in the second pass.
    pause = 2 * STEPS + 10
    out = stopped_at_pause(command(strategy, stopped, 3, n=1), pause)
    # The checkpoint's position as the resume line below writes it.
    assert re.search(
        r"preempted at step 10 of epoch 2; checkpoint: \S+/ckpt-54 \(epoch 1, step 10\)\.",
        out), out[-3000:]

    resumed = run(command(strategy, stopped, 3, n=1))
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert re.search(r"resuming from \S+/ckpt-54 \(epoch 1, step 10\), at that step",
                     resumed.stdout), resumed.stdout[-3000:]
    never = run(command(strategy, straight, 3, n=1))
    assert never.returncode == 0, never.stdout[-3000:]

    assert_same_end(stopped, straight, 3)


# Keras 3 on the newest stack too: 3.11 on pass another step index than the default stack's 3.8.
@pytest.mark.parametrize("keras", [tf_keras_twin(2), pytest.param(3, marks=pytest.mark.newest)])
def test_steps_per_execution_resumes_where_it_stopped(keras, tmp_path):
    """The script compiled with steps_per_execution=4 (one task, 44 steps an epoch: 11 calls),
    stopped mid-epoch 3 and resumed, ends with the weights of a run never stopped. The position
    comes from what each Keras passes to on_train_batch_end: Keras 3.0-3.10 the index of a
    call's first step, 3.11 on and tf-keras its last. Before tfdist read it by Keras (2026-11-28),
    Keras 3.8 recorded 'step 9' after 12 steps, and its resume skipped 9 calls (36 steps)."""
    stopped, straight = tmp_path / "stopped", tmp_path / "straight"
    spe = ["--steps_per_execution=4"]
    # Paused at the first call's end at or after step 98 (10 into epoch 3): 88 + 12 = 100.
    pause = 2 * 2 * STEPS + 10
    out = stopped_at_pause(
        command("mirrored", stopped, keras, n=1) + spe, pause, keras_environ(keras),
        "paused at global step 100 ")
    assert re.search(
        r"preempted at step 12 of epoch 3; checkpoint: \S+/ckpt-100 \(epoch 2, step 12\)\.",
        out), out[-3000:]

    resumed = run(command("mirrored", stopped, keras, n=1) + spe, env=keras_environ(keras))
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert re.search(r"resuming from \S+/ckpt-100 \(epoch 2, step 12\), at that step",
                     resumed.stdout), resumed.stdout[-3000:]
    never = run(command("mirrored", straight, keras, n=1) + spe, env=keras_environ(keras))
    assert never.returncode == 0, never.stdout[-3000:]

    meta = assert_same_end(stopped, straight, keras)
    assert meta["global_step"] == 3 * 2 * STEPS  # every call ran its 4 steps, none more


def test_steps_per_execution_that_misses_the_epochs_end_is_refused(tmp_path):
    """Keras 3 runs every call in full: 44 steps an epoch at 5 a call trains 45. With tfdist's
    checkpoints that is refused at fit's start, naming both numbers and the fix."""
    r = run(command("mirrored", tmp_path / "run", 3, n=1) + ["--steps_per_execution=5"])
    assert r.returncode != 0
    assert ("steps_per_execution=5 does not divide steps_per_epoch=44: Keras 3 runs each call in "
            "full, so every epoch trains 45 steps, not 44") in r.stdout + r.stderr, r.stderr[-2000:]
    assert "Fix: a steps_per_epoch that is a multiple of 5 (e.g. 40)" in r.stdout + r.stderr
