"""`tfdist scale` on this machine: each size under `tfdist launch`, real training, real files."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

TFDIST = str(Path(sys.executable).parent / "tfdist")
PNG = b"\x89PNG\r\n\x1a\n"
# The study's runs and files are tfdist's own (tfdist/study, no TensorFlow).
pytestmark = pytest.mark.default_stack


def scale(*args, timeout=300):
    return subprocess.run([TFDIST, "scale", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_weak_scaling_study_with_tfdist_launch(tmp_path):
    out = tmp_path / "study"
    r = scale("--strategy=multi_worker", "--sizes=1,2", "--steps=5", "--timed_epochs=2",
              "--model=mlp", f"--output={out}")
    assert r.returncode == 0, r.stdout + r.stderr
    study = json.loads((out / "scale.json").read_text())
    assert (out / "scale.png").read_bytes()[:8] == PNG
    assert (study["launcher"], study["model"], study["timed_steps"]) == ("tfdist launch", "mlp", 10)
    rows = {row["size"]: row for row in study["results"]}
    for size, row in rows.items():
        m = json.loads((out / f"size-{size}" / "metrics.json").read_text())
        assert (m["environment"], m["world_size"], m["model"]) == ("local", size, "mlp"), m
        assert (m["global_batch_size"], m["steps_per_epoch"], m["epochs"]) == (32 * size, 5, 3)
        assert row["samples_per_sec"] == m["samples_per_sec"] > 0
        assert row["epoch_samples_per_sec"] == m["epoch_samples_per_sec"][1:]
    rate1, rate2 = rows[1]["samples_per_sec"], rows[2]["samples_per_sec"]
    assert rows[2]["efficiency"] == pytest.approx(rate2 / rate1 / 2)
    assert "size  nodes x tasks  global batch" in r.stdout
    assert f"wrote {out / 'scale.json'} and {out / 'scale.png'}" in r.stdout


# A user's command instead of tfdist train: it measures its own rate (a busy loop) and writes it
# where the study reads it; size 2 fails.
COMMAND = """
import json, os, sys, time
size = int(os.environ["TFDIST_SCALE_SIZE"])
if size == 2:
    sys.exit(3)
start, n = time.perf_counter(), 0
while time.perf_counter() - start < 0.3:
    sum(range(1000))
    n += 1
if os.environ["TFDIST_LAUNCH_RANK"] == "0":
    rate = n * size / (time.perf_counter() - start)
    with open(os.path.join(sys.argv[1], "metrics.json"), "w") as f:
        json.dump({"samples_per_sec": rate, "global_batch_size": int(sys.argv[2]) * size}, f)
"""


@pytest.mark.slow
def test_a_failed_size_is_reported_and_the_study_goes_on(tmp_path):
    out = tmp_path / "study"
    r = scale("--sizes=1,2,3", f"--output={out}", "--", sys.executable, "-c", COMMAND, "{run_dir}",
              "{batch_size}")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "tfdist scale: size 2 FAILED: exit status 3" in r.stdout
    assert "size(s) 2 failed" in r.stderr
    study = json.loads((out / "scale.json").read_text())
    one, two, three = study["results"]
    assert two["status"] == 3 and not two.get("samples_per_sec")
    assert "exit status 3" in two["error"] and two["efficiency"] is None
    assert (one["global_batch_size"], three["global_batch_size"]) == (32, 96)
    assert three["efficiency"] == pytest.approx(three["samples_per_sec"] / one["samples_per_sec"] /
                                                3)
    assert (out / "scale.png").read_bytes()[:8] == PNG  # drawn from sizes 1 and 3


def test_flags_that_scale_sets_itself_are_refused(tmp_path):
    r = scale("--sizes=1", "--epochs=3", f"--output={tmp_path}")
    assert r.returncode == 2
    assert "--epochs is set by tfdist scale for every size; use --timed_epochs" in r.stderr


def test_an_earlier_run_directory_is_not_reused(tmp_path):
    (tmp_path / "size-2").mkdir()
    r = scale("--sizes=1,2", f"--output={tmp_path}")
    assert r.returncode == 2
    assert f"{tmp_path / 'size-2'} already exists" in r.stderr
    assert not (tmp_path / "size-1").exists()


def test_scale_and_plan_are_in_the_help():
    r = subprocess.run([TFDIST, "--help"], capture_output=True, text=True, timeout=60)
    assert "  scale " in r.stdout and "  plan " in r.stdout
    r = scale("--help", timeout=60)
    assert "--sizes" in r.stdout and "--scaling" in r.stdout and "--model" in r.stdout
    r = subprocess.run([TFDIST, "plan", "--help"], capture_output=True, text=True, timeout=60)
    assert "--gpu_memory" in r.stdout and "--measure" in r.stdout and "--optimizer" in r.stdout
