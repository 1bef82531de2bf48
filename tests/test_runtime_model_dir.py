"""The run directory of tfdist.init(): `model_dir=`, else $MODEL_DIR (which the jobs/ scripts
export), as rt.model_dir and the default of rt.callbacks() and rt.resume() (fake environments and
engine; real processes: tests/cli/test_launch_strategy.py)."""

from __future__ import annotations

import os

import pytest

from tfdist import runtime
from tfdist.cluster import build_roles, detect
from tfdist.errors import ConfigError


def test_model_dir_comes_from_the_argument_else_model_dir(tmp_path):
    job = str(tmp_path / "runs" / "exp1")
    assert runtime.run_directory(None, {}) == (None, "from $MODEL_DIR")
    assert runtime.run_directory(None, {"MODEL_DIR": ""})[0] is None
    assert runtime.run_directory(None, {"MODEL_DIR": job}) == (job, "from $MODEL_DIR")
    assert runtime.run_directory("runs/x", {}) == ("runs/x", "tfdist.init(model_dir=...)")
    assert runtime.run_directory(tmp_path / "x", {})[0] == str(tmp_path / "x")  # a Path


def test_the_same_directory_by_another_path_is_no_conflict(tmp_path, monkeypatch):
    (tmp_path / "runs").mkdir()
    os.symlink(tmp_path / "runs", tmp_path / "link")
    monkeypatch.chdir(tmp_path)
    job = str(tmp_path / "runs" / "exp1")
    for same in ("runs/exp1", "./runs/exp1/", str(tmp_path / "link" / "exp1")):
        assert runtime.run_directory(same, {"MODEL_DIR": job})[0] == same


def test_another_directory_than_model_dirs_is_an_error_naming_both(tmp_path):
    job = str(tmp_path / "runs" / "exp1")
    with pytest.raises(ConfigError) as e:
        runtime.run_directory("runs/other", {"MODEL_DIR": job})
    message = str(e.value)
    assert message.startswith(f"tfdist.init(model_dir='runs/other'), but this job's MODEL_DIR is "
                              f"'{job}'"), message
    assert "Fix: leave model_dir out of tfdist.init()" in message


class FakeEngine:
    name = "one_device"


def test_callbacks_and_resume_default_to_rt_model_dir(monkeypatch):
    monkeypatch.delenv("MODEL_DIR", raising=False)  # outside a job: an explicit one wins
    from tfdist.train import callbacks, checkpoint

    seen = []
    monkeypatch.setattr(
        callbacks,
        "training_callbacks",
        lambda engine, model_dir, options=None, **keywords: seen.append(model_dir) or [])
    monkeypatch.setattr(callbacks, "resume_identity", lambda engine, batch, identity: None)
    monkeypatch.setattr(checkpoint, "resume_point",
                        lambda model_dir, identity: seen.append(model_dir))
    cluster = detect({})
    rt = runtime.Runtime(cluster, build_roles(cluster), FakeEngine(), model_dir="runs/job")
    assert rt.model_dir == "runs/job"
    rt.callbacks()
    rt.callbacks(batch_size=8)
    rt.callbacks("runs/mine")  # an explicit one wins
    rt.resume()
    rt.resume("runs/mine")
    assert seen == ["runs/job", "runs/job", "runs/mine", "runs/job", "runs/mine"]
    rt = runtime.Runtime(cluster, build_roles(cluster), FakeEngine())
    rt.callbacks()
    rt.resume()
    assert rt.model_dir is None and seen[-2:] == [None, None]


def test_callbacks_and_resume_refuse_another_directory_than_the_jobs(monkeypatch, tmp_path):
    """A script's own directory inside a job (a snippet's hard-coded runs/exp1) would take the
    checkpoints away from the job's run directory, and every job of the script would resume from
    the same one: refused as tfdist.init refuses it; the job's own directory by another path
    passes."""
    from tfdist.train import callbacks, checkpoint

    job = str(tmp_path / "runs" / "job-1")
    monkeypatch.setenv("MODEL_DIR", job)
    monkeypatch.setattr(callbacks,
                        "training_callbacks",
                        lambda engine, model_dir, options=None, **keywords: [model_dir])
    monkeypatch.setattr(callbacks, "resume_identity", lambda engine, batch, identity: None)
    monkeypatch.setattr(checkpoint, "resume_point", lambda model_dir, identity: model_dir)
    cluster = detect({})
    rt = runtime.Runtime(cluster, build_roles(cluster), FakeEngine(), model_dir=job)
    for call, use in (("rt.callbacks", rt.callbacks), ("rt.resume", rt.resume)):
        with pytest.raises(ConfigError) as e:
            use("runs/exp1")
        assert str(e.value) == (
            f"{call}(model_dir='runs/exp1'), but this job's MODEL_DIR is '{job}' (the `jobs/` "
            "scripts export their run directory as MODEL_DIR): two run directories for one run. "
            f"Fix: leave model_dir out of {call}() (it takes $MODEL_DIR: rt.model_dir), or give "
            "the job that directory (`sbatch jobs/<strategy>.sbatch runs/exp1 -- ...`, or "
            "MODEL_DIR=runs/exp1).")
    assert rt.callbacks(job + "/") == [job + "/"] and rt.resume(job) == job
    with pytest.raises(ConfigError,
                       match="^tfdist train --model_dir=runs/exp1, but this job's "
                       ".* Fix: leave --model_dir out \\(tfdist train takes \\$MODEL_DIR\\)"):
        runtime.run_directory("runs/exp1", os.environ, "tfdist train")
