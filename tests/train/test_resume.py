"""Checkpoints and resume with real processes: stop by SIGTERM mid-epoch, crash mid-write,
refused resume, chief-only writes."""

import json
import os
import re
import signal
import time

import numpy as np
import pytest

from tests.helpers import TFDIST, finish, run, start, wait_for

pytestmark = pytest.mark.slow
TRAIN = ["train", "--pipeline=digits", "--epochs=3", "--batch_size=8", "--lr=0.01"]


def start_train(n, model_dir, *extra, tmpdir=None):
    cmd = [TFDIST, *TRAIN, f"--model_dir={model_dir}", *extra]
    if n > 1:
        cmd = [TFDIST, "launch", "-n", str(n), "--", *cmd]
    return start(cmd, env={"TMPDIR": str(tmpdir)} if tmpdir else None)


def weights(model_dir):
    import tfdist  # noqa: F401
    import tensorflow as tf

    return tf.keras.models.load_model(os.path.join(model_dir, "model.keras")).get_weights()


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
    assert sorted(p.name for p in model_dir.iterdir()) == [
        "checkpoints", "logs", "metrics.json", "model.keras"
    ]
    names = sorted(p.name for p in (model_dir / "checkpoints").iterdir())
    assert names and all(n.startswith("ckpt-") for n in names)
    # The worker's collective saves went to temporary directories, all removed.
    assert [p.name for p in scratch.iterdir() if p.name.startswith("tfdist-worker")] == []
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["resumed_from"] is None, metrics
