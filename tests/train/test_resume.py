"""Checkpoints and resume with real processes: stop by SIGTERM mid-epoch, a kill right after a
known mid-epoch checkpoint, crash mid-write, refused resume, chief-only writes."""

import json
import os
import re
import signal
import time

import numpy as np
import pytest

from tests.helpers import TFDIST, finish, launch, requires_horovod, run, start, wait_for
from tfdist.train.checkpoint import EXIT_AFTER_STEP

pytestmark = pytest.mark.slow
TRAIN = ["train", "--pipeline=digits", "--epochs=3", "--batch_size=8", "--lr=0.01"]


def start_train(n, model_dir, *extra, tmpdir=None):
    cmd = [TFDIST, *TRAIN, f"--model_dir={model_dir}", *extra]
    if n > 1:
        cmd = [TFDIST, "launch", "-n", str(n), "--", *cmd]
    return start(cmd, env={"TMPDIR": str(tmpdir)} if tmpdir else None)


def weights(model_dir, keras=2):
    import tfdist  # noqa: F401
    import tensorflow as tf

    from tfdist.keras3 import keras_module

    load = keras_module(keras).models.load_model if keras == 3 else tf.keras.models.load_model
    return load(os.path.join(model_dir, "model.keras")).get_weights()


@pytest.mark.parametrize("n", [1, 2])
def test_resume_after_sigterm_equals_uninterrupted(n, tmp_path):
    stopped, straight = tmp_path / "stopped", tmp_path / "straight"
    proc = start_train(n, stopped)
    head = wait_for(proc, "epoch 1/3: ")  # the end of epoch 1
    time.sleep(0.5)  # mid-epoch 2
    proc.send_signal(signal.SIGTERM)
    status, out = finish(proc)
    out = head + out
    assert status == 75, out[-3000:]
    # Stopped during epoch 2 (or, on a loaded machine, at its end or in epoch 3).
    assert re.search(r"preempted (at epoch [23], step \d+|after epoch 2);", out), out[-2000:]
    assert "Re-run the same command" in out
    assert not (stopped / "metrics.json").exists()

    r = run([TFDIST, "launch", "-n", str(n), "--", TFDIST, *TRAIN, f"--model_dir={stopped}"])
    assert r.returncode == 0, r.stdout[-3000:]
    assert "resuming from" in r.stdout + r.stderr
    r = run([TFDIST, "launch", "-n", str(n), "--", TFDIST, *TRAIN, f"--model_dir={straight}"])
    assert r.returncode == 0, r.stdout[-3000:]
    for a, b in zip(weights(stopped), weights(straight)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("strategy,keras", [
    ("multi_worker", 2),
    ("multi_worker", 3),
    pytest.param("horovod", 2, marks=[requires_horovod, pytest.mark.horovod]),
])
def test_resume_from_a_mid_epoch_step_equals_uninterrupted(strategy, keras, tmp_path):
    """Deterministic: both tasks exit right after the step checkpoint of global step 28 (the test
    hook), so the resume must skip the 6 batches of epoch 2 already trained (1437 digits at
    2 x 32 a step: 22 steps an epoch). Keras 3 has no step to resume at: tfdist skips the 6
    steps (tfdist.keras3.fit_hooks.start_at)."""
    args = [
        "train", "--pipeline=digits", "--epochs=2", "--batch_size=32", "--lr=0.01",
        f"--strategy={strategy}", "--checkpoint_steps=4", "--notensorboard", f"--keras={keras}"
    ]
    stopped, straight = tmp_path / "stopped", tmp_path / "straight"
    r = launch(2, TFDIST, *args, f"--model_dir={stopped}", env={EXIT_AFTER_STEP: "28"})
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-2000:]
    assert f"{EXIT_AFTER_STEP}=28: exiting" in r.stdout
    ckpt = stopped / "checkpoints" / "ckpt-28"
    meta = json.loads((ckpt / "meta.json").read_text())
    assert (meta["epoch"], meta["step"], meta["global_step"]) == (1, 6, 28)
    assert not (stopped / "metrics.json").exists()

    r = launch(2, TFDIST, *args, f"--model_dir={stopped}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert f"resuming from {ckpt} (epoch 1, step 6)" in r.stdout
    metrics = json.loads((stopped / "metrics.json").read_text())
    assert metrics["resumed_from"] == [1, 6] and metrics["keras"] == keras
    r = launch(2, TFDIST, *args, f"--model_dir={straight}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    for a, b in zip(weights(stopped, keras), weights(straight, keras)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_crash_while_writing_keeps_previous_checkpoint(tmp_path):
    # ResNet-50's state (~300 MB with momentum) takes long enough to write to be caught mid-way.
    model_dir = tmp_path / "run"
    args = [
        "--model=resnet50", "--steps_per_epoch=1", "--batch_size=2", "--epochs=4", "--notensorboard"
    ]
    proc = start_train(1, model_dir, *args)
    ckpts = model_dir / "checkpoints"
    deadline = time.monotonic() + 600
    while not (ckpts / "ckpt-1" / "meta.json").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "no first checkpoint"
        time.sleep(0.05)
    while not any(p.name.startswith(".tmp-ckpt-2") for p in ckpts.iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline, "second save not seen"
        time.sleep(0.002)
    proc.kill()
    proc.wait()
    assert sorted(p.name for p in ckpts.iterdir() if not p.name.startswith(".")) == ["ckpt-1"]

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
    r = run([TFDIST, *TRAIN[:2], "--epochs=2", "--keras=3", f"--model_dir={model_dir}"])
    assert r.returncode == 2
    assert "keras was 2, now 3" in r.stderr


@pytest.mark.parametrize("keras", [2, 3])
def test_only_the_chief_writes(keras, tmp_path):
    model_dir, scratch = tmp_path / "run", tmp_path / "tmp"
    scratch.mkdir()
    proc = start_train(2,
                       model_dir,
                       "--epochs=2",
                       "--batch_size=32",
                       "--checkpoint_steps=5",
                       f"--keras={keras}",
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
    assert metrics["keras"] == keras and metrics["samples_per_sec"] > 0, metrics
