"""What each size of a study trains with: batch, learning rate, command (pure functions)."""

import pytest

from tfdist.study.layout import Allocation
from tfdist.study.scale import ScaleConfig, plan_runs


def flags_of(run):
    return dict(a[2:].split("=", 1) for a in run.command if a.startswith("--") and "=" in a)


def test_weak_scaling_keeps_the_per_replica_batch_and_lets_train_scale_the_rate(tmp_path):
    cfg = ScaleConfig("horovod", [1, 2, 4],
                      str(tmp_path),
                      batch_size=16,
                      lr=0.1,
                      lr_scaling="sqrt",
                      train_args=["--model=mlp"])
    runs = plan_runs(cfg, Allocation("9", 2, 2), python="py")
    assert [(r.batch_size, r.global_batch_size) for r in runs] == [(16, 16), (16, 32), (16, 64)]
    assert [r.lr for r in runs] == pytest.approx([0.1, 0.1 * 2**0.5, 0.2])
    f = flags_of(runs[2])
    assert (f["batch_size"], f["lr"], f["lr_scaling"], f["model"]) == ("16", "0.1", "sqrt", "mlp")
    assert (f["epochs"], f["steps_per_epoch"]) == ("4", "50")  # 1 warm-up + 3 timed epochs
    assert f["model_dir"] == str(tmp_path / "size-4") and runs[2].env["MODEL_DIR"] == f["model_dir"]
    assert runs[2].command[:2] == ["srun", "--kill-on-bad-exit=1"
                                   ] and "--nodes=2" in runs[2].command


def test_strong_scaling_keeps_the_global_batch_and_its_rate(tmp_path):
    cfg = ScaleConfig("multi_worker", [2, 4, 8],
                      str(tmp_path),
                      scaling="strong",
                      batch_size=32,
                      lr=0.05)
    runs = plan_runs(cfg, None, python="py")
    assert [(r.batch_size, r.global_batch_size) for r in runs] == [(32, 64), (16, 64), (8, 64)]
    # The rate of the global batch 64 = 2 x 32 under the linear rule, not rescaled again.
    assert [(flags_of(r)["lr"], flags_of(r)["lr_scaling"]) for r in runs] == [("0.1", "none")] * 3
    assert runs[1].command[:5] == ["py", "-m", "tfdist.cli.main", "launch", "--nproc=4"]


def test_strong_scaling_needs_a_global_batch_every_size_divides(tmp_path):
    cfg = ScaleConfig("horovod", [1, 3], str(tmp_path), scaling="strong", global_batch_size=64)
    with pytest.raises(ValueError, match="64, which does not split evenly over 3 replicas"):
        plan_runs(cfg, None)


@pytest.mark.parametrize("changes,message", [
    (dict(strategy="mirrored"), "runs in one task"),
    (dict(strategy="parameter_server", scaling="strong"), "does not apply"),
    (dict(sizes=[1, 1]), "repeats a size"),
    (dict(sizes=[0, 2]), "positive task counts"),
    (dict(global_batch_size=64), "applies to --scaling=strong"),
])
def test_bad_studies_fail_before_anything_runs(tmp_path, changes, message):
    cfg = ScaleConfig(
        **dict(dict(strategy="multi_worker", sizes=[1, 2], output=str(tmp_path)), **changes))
    with pytest.raises(ValueError, match=message):
        plan_runs(cfg, None)


def test_a_users_command_gets_each_sizes_values(tmp_path):
    cfg = ScaleConfig("multi_worker", [1, 2],
                      str(tmp_path),
                      command=[
                          "python", "my.py", "--out={run_dir}", "--bs={batch_size}", "--lr={lr}",
                          "--steps={steps}", "--epochs={epochs}", "{other}"
                      ])
    run = plan_runs(cfg, None, python="py")[1]
    assert run.command[run.command.index("--") + 1:] == [
        "python", "my.py", f"--out={tmp_path / 'size-2'}", "--bs=32", "--lr=0.05", "--steps=50",
        "--epochs=4", "{other}"
    ]
    assert (run.env["TFDIST_SCALE_SIZE"], run.env["TFDIST_SCALE_BATCH_SIZE"]) == ("2", "32")


def test_a_size_too_large_for_the_allocation_is_planned_as_a_problem(tmp_path):
    cfg = ScaleConfig("multi_worker", [1, 4], str(tmp_path))
    small, big = plan_runs(cfg, Allocation("9", 2, 1))
    assert small.problem is None and big.command == [] and "--nodes=4" in big.problem
