"""`profile_steps`: TensorFlow's profiler traces steps A..B on every rank, and the chief's summary
names the slow rank and its phase (tfdist.train.profiling, tfdist.train.trace_phases). Real
processes, real traces: `tfdist train --profile_steps` in one process (Keras 3), and two
horovod ranks of a two-line script whose rank 1 reads its input slowly (tf-keras, the steps from
$PROFILE_STEPS as the `jobs/` scripts pass it on); under multi_worker the same script is refused
before it trains (TensorFlow's profiler crashes there: docs/profiling.md). Tiny models and few
steps: the traces are of a few milliseconds of work."""

from __future__ import annotations

import json

import pytest

from tests.helpers import PYTHON, TFDIST, requires_horovod, run
from tfdist.train import trace_phases

pytestmark = pytest.mark.slow

SCRIPT = __file__.replace("test_profiling.py", "profile_script.py")


def _phases(model_dir, rank) -> dict:
    return json.loads((model_dir / "profile" / str(rank) / "phases.json").read_text())


def test_tfdist_train_traces_the_steps_asked_and_reads_its_own_trace(tmp_path):
    model_dir = tmp_path / "run"
    r = run([
        TFDIST, "train", "--keras=3", "--pipeline=synthetic", "--model=mlp", "--epochs=2",
        "--steps_per_epoch=3", "--batch_size=8", "--profile_steps=3:5", f"--model_dir={model_dir}"
    ],
            timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    mine = _phases(model_dir, 0)
    # Started by the call of step 3 (the last of epoch 1), stopped after step 5 (epoch 2's 2nd).
    assert (mine["started_at_step"], mine["stopped_after_step"]) == (3, 5), mine
    files = trace_phases.trace_files(str(model_dir / "profile" / "0"))
    assert files == [mine["trace"]]
    # An event file beside it: TensorBoard takes the rank's directory for a run.
    assert list((model_dir / "profile" / "0").glob("events.out.tfevents.*"))
    # The trace TensorFlow wrote, read here again: one mark per traced step, nothing else.
    steps = trace_phases.step_phases(trace_phases.read_space(files[0]))
    assert [s["step"] for s in steps] == [3, 4, 5]
    for s in steps:
        parts = sum(s[p] for p in trace_phases.PHASES)
        assert s["ms"] > 0 and abs(parts - s["ms"]) < 1e-3 * s["ms"] + 1e-6, s
        assert s["compute"] > 0, s
    summary = json.loads((model_dir / "profile" / "summary.json").read_text())
    assert summary["steps"] == [3, 5] and list(summary["ranks"]) == ["0"]
    assert f"tfdist: {summary['line']}; {model_dir}/profile/summary.json" in r.stderr


@pytest.mark.parametrize("value", ["20", "5:3", "a:b", "1:4"])
def test_a_bad_profile_steps_is_refused_naming_it(value):
    r = run([TFDIST, "train", f"--profile_steps={value}"], timeout=120)
    assert r.returncode != 0
    assert f"--profile_steps={value!r}: expected A:B" in r.stderr or (
        value == "1:4" and "step 1 builds and compiles the step function" in r.stderr), r.stderr


def test_multi_worker_is_refused_before_training_naming_what_to_use(tmp_path):
    r = run([TFDIST, "launch", "-n", "2", "--strategy=multi_worker", "--", PYTHON, SCRIPT],
            env=dict(MODEL_DIR=tmp_path / "run", PROFILE_STEPS="7:9", TF_USE_LEGACY_KERAS="1"),
            timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0
    # Raised by the script's fit on each rank (the first to exit stops the other, which may not
    # get to print it).
    assert ("tfdist.errors.ConfigError: profile_steps=7:9 under multi_worker: refused: "
            "TensorFlow's profiler") in out, out[-3000:]
    assert "exited with status 1" in r.stderr and "--strategy=horovod" in out
    assert "script: rank" not in r.stdout  # refused before fit ran
    assert not (tmp_path / "run" / "profile").exists()


@pytest.mark.horovod
@requires_horovod
def test_two_ranks_summary_names_the_rank_with_slow_input(tmp_path):
    model_dir = tmp_path / "run"
    r = run([TFDIST, "launch", "-n", "2", "--strategy=horovod", "--", PYTHON, SCRIPT],
            env=dict(MODEL_DIR=model_dir, PROFILE_STEPS="7:9", TF_USE_LEGACY_KERAS="1"),
            timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for rank in (0, 1):
        assert f"[{rank}] script: rank {rank}: no profiler left running after fit" in r.stdout
        mine = _phases(model_dir, rank)
        assert (mine["started_at_step"], mine["stopped_after_step"]) == (7, 9), mine
        assert mine["steps"] == [7, 8, 9], mine
        assert trace_phases.trace_files(str(model_dir / "profile" / str(rank))) == [mine["trace"]]
    summary = json.loads((model_dir / "profile" / "summary.json").read_text())
    assert summary["slowest"]["rank"] == 1 and summary["slowest"]["phase"] == "input", summary
    assert summary["line"].startswith("profile: rank 1 is "), summary
    assert "waiting for input" in summary["line"]
    # Rank 0 spends the same steps waiting for rank 1 in its all-reduce: Horovod's runs on a
    # thread TensorFlow does not trace, and its wait shows as idle.
    ranks = summary["ranks"]
    assert ranks["0"]["idle_ms"] > ranks["0"]["input_ms"], summary
    assert summary["line"] in r.stdout + r.stderr
