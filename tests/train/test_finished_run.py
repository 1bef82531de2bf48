"""Re-running a finished run: it says so and keeps its results; --restart trains anew."""

import json

import pytest

from tests.helpers import TFDIST, launch, run

pytestmark = [pytest.mark.slow, pytest.mark.default_stack]
TRAIN = ["train", "--pipeline=digits", "--epochs=1", "--batch_size=32"]


def test_a_finished_run_says_so_and_keeps_its_metrics(tmp_path):
    model_dir = tmp_path / "run"
    args = [TFDIST, *TRAIN, "--strategy=multi_worker", f"--model_dir={model_dir}"]
    r = launch(2, *args)
    assert r.returncode == 0, r.stdout[-3000:]
    metrics = (model_dir / "metrics.json").read_bytes()
    model_written = (model_dir / "model.keras").stat().st_mtime_ns
    accuracy = json.loads(metrics)["final"]["test_accuracy"]

    r = launch(2, *args)
    assert r.returncode == 0, r.stdout[-3000:]
    assert f"[0] tfdist train: {model_dir} already finished: its checkpoint ckpt-22 has 1 " \
        "epochs (--epochs=1); nothing trained, its metrics.json is kept." in r.stdout
    assert "training from epoch" not in r.stdout
    # The result line is the kept one, as `make demo` prints it from metrics.json.
    assert f"[0] tfdist train: multi_worker x2 replicas: test accuracy {accuracy:.4f}" in r.stdout
    assert (model_dir / "metrics.json").read_bytes() == metrics
    assert (model_dir / "model.keras").stat().st_mtime_ns == model_written


def test_restart_trains_anew(tmp_path):
    model_dir = tmp_path / "run"
    r = run([TFDIST, *TRAIN, "--epochs=2", f"--model_dir={model_dir}"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert (model_dir / "checkpoints" / "ckpt-88").is_dir()
    r = run([TFDIST, *TRAIN, "--restart", f"--model_dir={model_dir}"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "removed the previous run's" in r.stderr and "resuming from" not in r.stderr
    assert "tfdist: training from epoch 1/1, 44 steps each" in r.stderr  # one epoch trained
    assert "tfdist: epoch 1/1: loss " in r.stderr
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert (metrics["epochs"], metrics["resumed_from"]) == (1, None)
    assert metrics["samples_per_sec"] > 0 and metrics["final"]["loss"] is not None
    # Only the new run's checkpoint: the old ckpt-88 would otherwise pass for the newest.
    assert sorted(p.name for p in (model_dir / "checkpoints").iterdir()) == ["ckpt-44"]
