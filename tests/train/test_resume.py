"""Checkpoints and resume with real processes: stop by SIGTERM mid-epoch, a kill right after a
known mid-epoch checkpoint, crash mid-write, refused resume, chief-only writes."""

import json
import os
import re
import signal

import numpy as np
import pytest

from tests.helpers import (TFDIST, assert_nothing_left, finish, launch, requires_horovod, run,
                           start, wait_for)
from tfdist.train.checkpoint import EXIT_AFTER_STEP, EXIT_WHILE_SAVING
from tfdist.train.preemption import PAUSE_AFTER_STEP

pytestmark = pytest.mark.slow
TRAIN = ["train", "--pipeline=digits", "--epochs=3", "--batch_size=8", "--lr=0.01"]


def start_train(n, model_dir, *extra, tmpdir=None, env=None):
    cmd = [TFDIST, *TRAIN, f"--model_dir={model_dir}", *extra]
    if n > 1:
        cmd = [TFDIST, "launch", "-n", str(n), "--", *cmd]
    return start(cmd, env=dict(env or {}, **({"TMPDIR": str(tmpdir)} if tmpdir else {})))


def weights(model_dir):
    import tfdist  # noqa: F401
    import tensorflow as tf

    return tf.keras.models.load_model(os.path.join(model_dir, "model.keras")).get_weights()


@pytest.mark.parametrize("n", [1, 2])
def test_resume_after_sigterm_equals_uninterrupted(n, tmp_path):
    stopped, straight = tmp_path / "stopped", tmp_path / "straight"
    # 1437 digits at 8 per replica: 179 steps an epoch alone, 89 with two. Every task waits
    # after 40 steps of epoch 2 (the test hook) until the signal: mid-epoch on any machine.
    pause = {1: 179, 2: 89}[n] + 40
    proc = start_train(n, stopped, env={PAUSE_AFTER_STEP: str(pause)})
    head = wait_for(proc, f"{PAUSE_AFTER_STEP}={pause}: paused at global step {pause} ")
    proc.send_signal(signal.SIGTERM)
    status, out = finish(proc)
    out = head + out
    assert status == 75, out[-3000:]
    # Alone: right after that step; two tasks stop at their next agreement (its interval depends
    # on the step time), at the latest at the end of epoch 2.
    where = r"at epoch 2, step 40;" if n == 1 else r"(at epoch 2, step \d+|after epoch 2);"
    assert re.search("preempted " + where, out), out[-2000:]
    assert "Re-run the same command" in out
    assert not (stopped / "metrics.json").exists()

    r = run([TFDIST, "launch", "-n", str(n), "--", TFDIST, *TRAIN, f"--model_dir={stopped}"])
    assert r.returncode == 0, r.stdout[-3000:]
    assert "resuming from" in r.stdout + r.stderr
    r = run([TFDIST, "launch", "-n", str(n), "--", TFDIST, *TRAIN, f"--model_dir={straight}"])
    assert r.returncode == 0, r.stdout[-3000:]
    assert_nothing_left()  # after a preemption, a resume and a run to the end
    for a, b in zip(weights(stopped), weights(straight)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "strategy",
    ["multi_worker",
     pytest.param("horovod", marks=[requires_horovod, pytest.mark.horovod])])
def test_resume_from_a_mid_epoch_step_equals_uninterrupted(strategy, tmp_path):
    """Deterministic: both tasks exit right after the step checkpoint of global step 28 (the test
    hook), so the resume must skip the 6 batches of epoch 2 already trained (1437 digits at
    2 x 32 a step: 22 steps an epoch)."""
    args = [
        "train", "--pipeline=digits", "--epochs=2", "--batch_size=32", "--lr=0.01",
        f"--strategy={strategy}", "--checkpoint_steps=4", "--notensorboard"
    ]
    stopped, straight = tmp_path / "stopped", tmp_path / "straight"
    r = launch(2, TFDIST, *args, f"--model_dir={stopped}", env={EXIT_AFTER_STEP: "28"})
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-2000:]
    assert f"{EXIT_AFTER_STEP}=28: exiting" in r.stdout
    assert_nothing_left()  # after a failure (status 3)
    ckpt = stopped / "checkpoints" / "ckpt-28"
    meta = json.loads((ckpt / "meta.json").read_text())
    assert (meta["epoch"], meta["step"], meta["global_step"]) == (1, 6, 28)
    assert not (stopped / "metrics.json").exists()

    r = launch(2, TFDIST, *args, f"--model_dir={stopped}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert f"resuming from {ckpt} (epoch 1, step 6)" in r.stdout
    assert json.loads((stopped / "metrics.json").read_text())["resumed_from"] == [1, 6]
    r = launch(2, TFDIST, *args, f"--model_dir={straight}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    for a, b in zip(weights(stopped), weights(straight)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_crash_while_writing_keeps_previous_checkpoint(tmp_path):
    # The chief dies half-way through writing the checkpoint of epoch 2 (the test hook: its state
    # written under the temporary name, not yet renamed into place).
    model_dir = tmp_path / "run"
    args = ["--steps_per_epoch=1", "--batch_size=2", "--epochs=4", "--notensorboard"]
    r = run([TFDIST, *TRAIN[:2], *args, f"--model_dir={model_dir}"], env={EXIT_WHILE_SAVING: "2"})
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"{EXIT_WHILE_SAVING}=2: exiting while writing its checkpoint" in r.stderr
    ckpts = model_dir / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir() if not p.name.startswith(".")) == ["ckpt-1"]
    assert any(p.name.startswith(".tmp-ckpt-2") for p in ckpts.iterdir()), list(ckpts.iterdir())

    r = run([TFDIST, *TRAIN[:2], *args, f"--model_dir={model_dir}"], timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    log = r.stdout + r.stderr
    assert "removing .tmp-ckpt-2" in log
    assert "resuming from " + str(ckpts / "ckpt-1") + " (epoch 1, step 0)" in log
    assert not any(p.name.startswith(".tmp") for p in ckpts.iterdir())


def test_refused_resume_names_what_differs(tmp_path):
    model_dir = tmp_path / "run"
    r = run([TFDIST, *TRAIN[:2], "--epochs=1", f"--model_dir={model_dir}"])
    assert r.returncode == 0, r.stderr[-3000:]
    r = run([TFDIST, *TRAIN[:2], "--epochs=2", "--model=mlp", f"--model_dir={model_dir}"])
    assert r.returncode == 2
    assert "Cannot resume from" in r.stderr and "model was 'cnn', now 'mlp'" in r.stderr
    assert "Use a new --model_dir" in r.stderr
    r = run([
        TFDIST, *TRAIN[:2], "--epochs=2", "--strategy=mirrored", "--cpu_devices=2",
        f"--model_dir={model_dir}"
    ])
    assert r.returncode == 2
    assert "strategy was 'default', now 'mirrored'" in r.stderr


def test_only_the_chief_writes(tmp_path):
    model_dir, scratch = tmp_path / "run", tmp_path / "tmp"
    scratch.mkdir()
    proc = start_train(2,
                       model_dir,
                       "--epochs=2",
                       "--batch_size=32",
                       "--checkpoint_steps=5",
                       tmpdir=scratch)
    status, out = finish(proc)
    assert status == 0, out[-3000:]
    # Every file and folder under model_dir, sub-folders included, is one the chief writes: its
    # checkpoints, ONE TensorBoard event file (a worker's would be a second one), its results.
    chief_writes = re.compile(
        r"^(checkpoints(/ckpt-\d+(/(meta\.json|state\.index|"
        r"state\.data-00000-of-00001))?)?|logs(/train(/events\.out\."
        r"tfevents\.\d+\.[\w.-]+\.\d+\.\d+\.v2)?)?|metrics\.json|model\.keras)$")
    tree = sorted(str(p.relative_to(model_dir)) for p in model_dir.rglob("*"))
    assert [p for p in tree if not chief_writes.match(p)] == [], tree
    assert len([p for p in tree if "tfevents" in p]) == 1, tree
    ckpts = sorted(p for p in tree if re.fullmatch(r"checkpoints/ckpt-\d+", p))
    assert ckpts and all(f"{c}/meta.json" in tree and f"{c}/state.index" in tree for c in ckpts)
    assert {"metrics.json", "model.keras"} <= set(tree)
    # The worker's collective saves went to temporary directories, all removed.
    assert [p.name for p in scratch.iterdir() if p.name.startswith("tfdist-worker")] == []
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["resumed_from"] is None, metrics
