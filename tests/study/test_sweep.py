"""tfdist sweep's logic without Slurm: settings, names, arrays, and how an element's state is read
from its files. The real job arrays: tests/slurm/test_sweep_jobs.py."""

from __future__ import annotations

import json
import subprocess

import pytest

from tfdist.errors import ConfigError
from tfdist.study.sweep import grid, plot, record, status, submit, table


def test_a_grid_is_every_combination_the_last_setting_fastest():
    settings = grid.parse_grid("lr=0.01,0.1; batch_size=32,64")
    assert settings == [{
        "lr": "0.01",
        "batch_size": "32"
    }, {
        "lr": "0.01",
        "batch_size": "64"
    }, {
        "lr": "0.1",
        "batch_size": "32"
    }, {
        "lr": "0.1",
        "batch_size": "64"
    }]
    names = [e.name for e in grid.elements_of(settings)]
    assert names[1] == "lr=0.01,batch_size=64"
    assert grid.elements_of(settings)[1].args == ["--lr=0.01", "--batch_size=64"]


@pytest.mark.parametrize("bad,said", [
    ("lr", "is not NAME=VALUE"),
    ("lr=", "is not NAME=VALUE"),
    ("", "is empty"),
    ("lr=1;lr=2", "names a setting twice"),
])
def test_a_bad_grid_says_what_to_write(bad, said):
    with pytest.raises(ConfigError, match=said):
        grid.parse_grid(bad)


def test_a_settings_file_is_one_element_per_line(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("# learning rates\n--lr=0.1 --model=cnn\n\n--lr=1 --optimizer='sgd'\n")
    assert grid.parse_settings_file(str(f)) == [{
        "lr": "0.1",
        "model": "cnn"
    }, {
        "lr": "1",
        "optimizer": "sgd"
    }]
    f.write_text("lr=0.1\n")
    with pytest.raises(ConfigError, match=r"s.txt:1: 'lr=0.1' is not --NAME=VALUE"):
        grid.parse_settings_file(str(f))
    with pytest.raises(ConfigError, match="more than once"):
        grid.elements_of([{"lr": "1"}, {"lr": "1"}])


def test_values_are_made_safe_for_a_directory_name():
    [e] = grid.elements_of([{"data": "/shared/x y", "lr": "1e-3"}])
    assert e.name == "data=_shared_x_y,lr=1e-3" and e.args == ["--data=/shared/x y", "--lr=1e-3"]


@pytest.mark.parametrize("indices,size,chunks", [
    (range(4), 1001, [(0, [0, 1, 2, 3])]),
    (range(5), 2, [(0, [0, 1]), (2, [0, 1]), (4, [0])]),
    ([1, 3, 6], 5, [(0, [1, 3]), (5, [1])]),
])
def test_more_elements_than_max_array_size_make_several_arrays(indices, size, chunks):
    assert submit.array_chunks(indices, size) == chunks


def test_array_specs_compress_ranges_and_throttle():
    assert submit.array_spec([0, 1, 2, 3]) == "0-3"
    assert submit.array_spec([0, 2, 3, 7], max_running=2) == "0,2-3,7%2"


class FakeSlurm:
    """sbatch, squeue and scontrol as a Runner: records the calls, answers like Slurm 22.05."""

    def __init__(self, max_array_size=1001, queue=""):
        self.calls, self.max, self.queue, self.next = [], max_array_size, queue, 100

    def __call__(self, cmd):
        self.calls.append(cmd)
        if cmd[0] == "scontrol":
            out = f"MaxArraySize            = {self.max}\nMaxJobCount = 10000\n"
        elif cmd[0] == "sbatch":
            self.next += 1
            out = f"{self.next}\n"
        else:
            out = self.queue
        return subprocess.CompletedProcess(cmd, 0, out, "")


def make_sweep(tmp_path, jobs, n=4, command=()):
    settings = [{"lr": str(i)} for i in range(n)]
    sweep = record.new_sweep(settings, "multi_worker", ["--epochs=2"], list(command), ["--nodes=1"])
    record.save(str(tmp_path), sweep)
    (jobs / "multi_worker.sbatch").write_text("#!/bin/bash\n")
    return sweep


def test_submit_sends_arrays_through_the_jobs_script_and_records_them(tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    d = tmp_path / "sweep"
    d.mkdir()
    sweep = make_sweep(d, jobs, n=5)
    slurm = FakeSlurm(max_array_size=3)
    made = submit.submit(str(d), sweep, range(5), str(jobs), max_running=2, run=slurm)
    assert [(m["array_job"], m["offset"], m["indices"]) for m in made] == [("101", 0, [0, 1, 2]),
                                                                           ("102", 3, [3, 4])]
    first = [c for c in slurm.calls if c[0] == "sbatch"][0]
    assert "--array=0-2%2" in first and "--nodes=1" in first
    assert (f"--export=ALL,TFDIST_SWEEP_DIR={d},TFDIST_SWEEP_OFFSET=0,TFDIST_JOBS_DIR={jobs}"
            in first)
    assert first[-2:] == [str(jobs / "multi_worker.sbatch"), "--epochs=2"]
    assert json.loads((d / "sweep.json").read_text())["submissions"][1]["offset"] == 3
    assert record.element(record.load(str(d)), str(d), 4) == (str(d / "runs" / "lr=4"), ["--lr=4"])


def test_a_users_command_goes_after_the_double_dash(tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    sweep = make_sweep(tmp_path, jobs, n=1, command=["python", "my_train.py"])
    sweep["train_args"] = []
    slurm = FakeSlurm()
    submit.submit(str(tmp_path), sweep, [0], str(jobs), run=slurm)
    assert slurm.calls[-1][-3:] == ["--", "python", "my_train.py"]


def write_log(d, job, text):
    (d / "logs").mkdir(exist_ok=True)
    (d / "logs" / f"{job}.out").write_text(text)


def test_each_elements_state_comes_from_slurm_and_its_files(tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    sweep = make_sweep(tmp_path, jobs, n=5)
    sweep["submissions"] = [{"array_job": "7", "offset": 0, "indices": [0, 1, 2, 3]}]
    record.save(str(tmp_path), sweep)
    # 0 done (requeued once on the way), 1 running, 2 failed, 3 stopped, 4 never submitted.
    run0 = tmp_path / "runs" / "lr=0"
    run0.mkdir(parents=True)
    (run0 / "metrics.json").write_text(json.dumps({"epochs": 2, "final": {"test_accuracy": 0.97}}))
    write_log(
        tmp_path, "7_0", "tfdist job: Slurm job 8, run 1 (SLURM_RESTART_COUNT=0)\n"
        "tfdist job: Slurm job 8, run 2 (SLURM_RESTART_COUNT=1)\nfinished\n")
    write_log(
        tmp_path, "7_2", "0: ValueError: boom\ntfdist job: error: the srun step failed with "
        "status 1 (2026-11-26).\n")
    write_log(tmp_path, "7_3", "tfdist job: preempted (status 75): resumable\n")
    rows = status.status(str(tmp_path), run=FakeSlurm(queue="7_1 RUNNING\n"))
    states = {r["index"]: (r["state"], r["detail"]) for r in rows}
    assert states == {
        0: ("done", ""),
        1: ("running", ""),
        2: ("failed", "status 1: 0: ValueError: boom"),
        3: ("stopped", "preempted, resumable: resubmit it"),
        4: ("not submitted", ""),
    }
    assert rows[0]["requeues"] == 1 and rows[0]["epochs"] == 2
    assert status.unfinished(rows) == [2, 3, 4] and status.unfinished(rows,
                                                                      failed_only=True) == [2, 3]
    text = table.table(rows, "test_accuracy")
    assert text.splitlines()[1].split()[:4] == ["0", "0", "done", "1"]  # the best first
    assert "#2 failed: status 1: 0: ValueError: boom" in text
    assert table.summary(rows) == ("5 element(s): 1 done, 1 failed, 1 not submitted, 1 running, "
                                   "1 stopped")


def test_a_different_sweep_in_the_same_directory_is_named(tmp_path):
    a = record.new_sweep([{"lr": "1"}], "multi_worker", [], [], [])
    assert record.same_plan(a, record.new_sweep([{
        "lr": "1"
    }], "multi_worker", [], [], ["-p", "x"])) is None
    assert record.same_plan(a, record.new_sweep([{
        "lr": "2"
    }], "multi_worker", [], [], [])) == "elements"
    with pytest.raises(ConfigError, match="not a sweep's directory"):
        record.load(str(tmp_path))


def test_the_plot_draws_the_metric_against_each_setting(tmp_path):
    rows = [{
        "settings": {
            "lr": lr,
            "model": m
        },
        "final": {
            "test_accuracy": acc
        }
    } for lr, m, acc in [("0.01", "cnn", 0.9), ("0.1", "cnn", 0.95), ("1", "mlp", None)]]
    png = tmp_path / "sweep.png"
    assert plot.plot(rows, "test_accuracy", str(png)) is None
    assert png.stat().st_size > 0
    assert plot.plot(rows, "test_loss", str(png)) == "no element has a final test_loss yet"


def test_a_setting_that_is_no_tfdist_train_flag_is_refused_before_anything_runs(tmp_path):
    from tests.helpers import TFDIST, run

    r = run([TFDIST, "sweep", tmp_path / "s", "--grid=lrr=0.1,1", "--", "--epochs=2", "--nometer"])
    assert r.returncode == 2 and "lrr: not flag(s) of tfdist train" in r.stderr, r.stderr
    assert not (tmp_path / "s").exists()  # nothing written, nothing submitted
