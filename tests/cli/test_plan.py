"""`tfdist plan`: its numbers from the built model, its activation estimate against what
TensorFlow measures on this machine's CPU (the factor stated in docs/planning.md), and the flags of
`tfdist train` it reads as train does (--keras, --pipeline_option, --lr_scaling, --num_ps)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from absl import flags
from absl import logging as absl_logging

from tfdist.app.config import default_keras
from tfdist.app.plan import lr_table, parameter_server
from tfdist.cli import plan as plan_cli

TFDIST = str(Path(sys.executable).parent / "tfdist")

# The slow tests import TensorFlow and build a model in a process; the factors they check were
# measured on the default stack (bench/results/plan). The others parse flags or format a plan.
pytestmark = pytest.mark.default_stack
# The small CNN's bound (its workspace, below): 1.38x on an AVX-512 CPU, 8.2x on an AVX2-only one
# (2026-11-25), 1.19 and 1.22 on this one (2026-11-26). 12x leaves room for another CPU's kernels
# and still fails a plan whose estimate lost the weights or the activations.
CNN_WORKSPACE_FACTOR = 12


def plan(*args):
    r = subprocess.run([TFDIST, "plan", "--format=json", *args],
                       capture_output=True,
                       text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


@pytest.mark.slow
def test_resnet50_on_an_80GB_gpu():
    p = plan("--model=resnet50", "--input_shape=224,224,3", "--num_classes=1000",
             "--optimizer=adam", "--batch_size=64", "--gpu_memory=80GB", "--lr=0.1",
             "--replicas=1,4,16")
    m = p["memory"]
    assert m["params"] == p["count_params"] == 25_636_712  # Keras's ResNet-50 with a 1000-way top
    assert (m["weight_bytes"], m["slot_bytes"]) == (4 * m["params"], 8 * m["trainable_params"] + 8)
    for name, s in p["strategies"].items():
        fixed = m["weight_bytes"] + m["gradient_bytes"]
        if name not in ("parameter_server", "central_storage"):
            fixed += m["slot_bytes"]
        assert s["replica_bytes"] == fixed + 64 * m["activation_bytes_per_sample"]
        assert s["fits"] is True
        assert s["largest_batch"] == (80 * 10**9 - fixed) // m["activation_bytes_per_sample"]
    assert [(r["replicas"], r["global_batch_size"]) for r in p["replicas"]] == [(1, 64), (4, 256),
                                                                                (16, 1024)]
    assert [r["lr_linear"] for r in p["replicas"]] == pytest.approx([0.1, 0.4, 1.6])
    assert [r["lr_sqrt"] for r in p["replicas"]] == pytest.approx([0.1, 0.2, 0.4])


# The configurations closest to the stated bounds (of 32 measured: docs/planning.md), and resnet50.
@pytest.mark.parametrize("model,batch,optimizer", [("mlp", 32, "sgd"), ("cnn", 32, "adam"),
                                                   ("resnet_small", 256, "sgd"),
                                                   ("resnet50", 32, "sgd")])
@pytest.mark.slow
def test_estimate_is_within_the_stated_factor_of_tensorflows_measured_peak(model, batch, optimizer):
    from tfdist.app.memory import CPU_PEAK_FACTOR

    p = plan(f"--model={model}", f"--batch_size={batch}", f"--optimizer={optimizer}", "--measure")
    x = p["measured"]
    assert x["device"] == "CPU:0" and x["estimate_bytes"] == p["strategies"]["horovod"][
        "replica_bytes"]
    # The variables and slots are still in use after the step: what was measured is real.
    assert x["current_bytes"] >= p["memory"]["weight_bytes"] + p["memory"]["slot_bytes"]
    assert x["factor"] == pytest.approx(x["peak_bytes"] / x["estimate_bytes"])
    low, high = CPU_PEAK_FACTOR
    assert low <= x["factor"], x
    if model != "cnn":
        # The small CNN's convolutions take a workspace whose size depends on the CPU's kernels,
        # not on the model: 1.38x the estimate on an AVX-512 CPU (2026-11-23), 8.2x (37 MB against
        # 4.5 MB; 2.5x at batch 256) on an AVX2-only one, with oneDNN on or off (2026-11-25).
        assert x["factor"] <= high, x
    else:
        assert x["factor"] <= CNN_WORKSPACE_FACTOR, x
    print(f"{model} batch {batch} {optimizer}: measured/estimate {x['factor']:.2f}")


# --- the flags of tfdist train that plan reads ---------------------------------------------------


def options(*args):
    """PlanOptions from `tfdist plan ARGS`, parsed as the command parses them."""
    verbosity = absl_logging.get_verbosity()
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["tfdist plan", *args])
    try:
        return plan_cli.options_from_flags()
    finally:
        flags.FLAGS.unparse_flags()
        absl_logging.set_verbosity(verbosity)


def test_plan_reads_the_train_flags_that_change_the_run():
    o = options("--keras=2", "--lr_scaling=sqrt", "--strategy=parameter_server", "--num_ps=3",
                "--evaluator", "--pipeline=synthetic", "--pipeline_option=shape=8,8,1",
                "--pipeline_option=num_classes=5")
    assert (o.keras, o.lr_scaling, o.strategy, o.num_ps,
            o.evaluator) == (2, "sqrt", "parameter_server", 3, True)
    assert o.pipeline_options == {"shape": "8,8,1", "num_classes": "5"}
    # parameter_server's defaults, as train takes them
    assert (o.optimizer, o.lr) == ("adam", 0.001)
    o = options("--keras=3")
    assert (o.keras, o.lr_scaling, o.num_ps, o.pipeline_options) == (3, "linear", 1, {})
    # no --keras: the one tf.keras is, as train resolves it
    assert options().keras == default_keras()


def test_lr_column_is_the_rate_train_scales_to():
    rows = {rule: lr_table(0.1, 32, (1, 4, 16), rule) for rule in ("linear", "sqrt", "none")}
    assert [r["lr"] for r in rows["linear"]] == pytest.approx([0.1, 0.4, 1.6])
    assert [r["lr"] for r in rows["sqrt"]] == pytest.approx([0.1, 0.2, 0.4])
    assert [r["lr"] for r in rows["none"]] == pytest.approx([0.1, 0.1, 0.1])
    for rule in rows:  # the columns of both rules stay, whichever train uses
        assert [r["global_batch_size"] for r in rows[rule]] == [32, 128, 512]
        assert [r["lr_linear"] for r in rows[rule]] == pytest.approx([0.1, 0.4, 1.6])
        assert [r["lr_sqrt"] for r in rows[rule]] == pytest.approx([0.1, 0.2, 0.4])


def test_num_ps_sets_the_parameter_server_layout_and_bytes_per_ps_task():
    one, three = parameter_server(1, False, 1200, 500), parameter_server(3, True, 1200, 500)
    assert (one["tasks_besides_workers"], one["ps_task_bytes_average"],
            one["ps_task_bytes_at_least"]) == (2, 1200, 1200)
    # 1 chief + 3 ps + 1 evaluator; whole variables: the largest one's task holds at least it
    assert (three["tasks_besides_workers"], three["ps_task_bytes_average"],
            three["ps_task_bytes_at_least"]) == (5, 400, 500)


def fake_plan(**changes):
    """A plan as make_plan returns it, for a small model (no TensorFlow model built)."""
    memory = dict(params=1000,
                  trainable_params=1000,
                  weight_bytes=4000,
                  gradient_bytes=4000,
                  slot_bytes=4008,
                  slot_variables=2,
                  compute_copy_bytes=0,
                  activation_bytes_per_sample=100)
    strategy = dict(replica_bytes=15000, fits=None, largest_batch=None)
    plan = dict(model="mlp",
                input_shape=[8, 8, 1],
                num_classes=5,
                optimizer="sgd",
                mixed_precision="float32",
                batch_size=32,
                count_params=1000,
                memory=memory,
                activation_bytes=3200,
                device_memory_bytes=None,
                gpu_memory=None,
                strategies={name: strategy
                            for name in ("mirrored", "parameter_server")},
                ps_bytes=8008,
                parameter_server=parameter_server(1, False, 8008, 8008),
                replicas=lr_table(0.1, 32, (1, 4), "linear"),
                lr=0.1,
                lr_scaling="linear",
                lr_course=dict(warmup_epochs=0.0, schedule="constant"),
                strategy="auto",
                keras=3,
                pipeline="synthetic",
                pipeline_options={},
                input_from_pipeline=True)
    plan.update(changes)
    return plan


def test_text_says_what_each_flag_changed():
    base = plan_cli.text(fake_plan())
    assert "keras            3 (Keras 3), what tfdist train builds with (--keras)" in base
    assert "keras            2 (tf-keras)" in plan_cli.text(fake_plan(keras=2))
    assert "  pipeline         synthetic\n" in base
    assert ("  pipeline         synthetic --pipeline_option=shape=8,8,1\n"
            in plan_cli.text(fake_plan(pipeline_options={"shape": "8,8,1"})))
    assert ("  pipeline         synthetic (its input not read: --input_shape and --num_classes "
            "given)\n" in plan_cli.text(fake_plan(input_from_pipeline=False)))
    # --lr_scaling: the column train trains with
    assert "tfdist train scales it by --lr_scaling=linear" in base
    assert base.splitlines()[-1].split()[-1] == "0.4"  # N=4, linear: no line of the course
    # --warmup_epochs and --lr_schedule: a line under the table
    warm = plan_cli.text(fake_plan(lr_course=dict(warmup_epochs=5.0, schedule="cosine")))
    assert warm.splitlines()[-1].startswith(
        "  tfdist train ramps the rate linearly from --lr=0.1 "
        "to the `train: linear` column's rate over the first 5 "
        "epochs (--warmup_epochs), then decays it along a cosine")
    sqrt = plan_cli.text(fake_plan(lr_scaling="sqrt", replicas=lr_table(0.1, 32, (1, 4), "sqrt")))
    assert "--lr_scaling=sqrt" in sqrt and "train: sqrt" in sqrt
    assert sqrt.splitlines()[-1].split()[-1] == "0.2"
    # --num_ps (and --evaluator): the tasks and the bytes per ps task
    assert ("parameter_server with --num_ps=1: 1 chief + 1 ps + the workers (W workers: W + 2 "
            "tasks); the ps task holds 7.82 KiB of weights + slots." in base)
    ps = plan_cli.text(
        fake_plan(strategy="parameter_server",
                  parameter_server=parameter_server(2, True, 8008, 6000)))
    assert ("parameter_server with --num_ps=2: 1 chief + 2 ps + 1 evaluator + the workers "
            "(W workers: W + 4 tasks); per ps task about 3.91 KiB" in ps)
    assert "; the fullest holds at least 5.86 KiB (whole variables" in ps
    assert "the replicas in sync are one worker's GPUs" in ps
    assert "one worker's GPUs" not in base


def run_tfdist(command, *args):
    return subprocess.run([TFDIST, command, *args], capture_output=True, text=True, timeout=300)


# Refused while absl parses the flags, which plan shares with train: no TensorFlow loads.
@pytest.mark.parametrize("args", [
    ["--keras=5"],
    ["--strategy=parameter_server", "--num_ps=0"],
    ["--lr_scaling=cubic"],
    ["--strategy=mirrored", "--num_ps=2"],
    ["--strategy=horovod", "--keras=3", "--backward_passes_per_step=2"],
])
def test_plan_refuses_a_flag_value_as_train_does(args):
    planned, trained = run_tfdist("plan", *args), run_tfdist("train", *args)
    assert planned.returncode == trained.returncode != 0
    assert planned.stderr and planned.stderr == trained.stderr


@pytest.mark.slow
@pytest.mark.parametrize("option", ["colour=red", "shape"])
def test_plan_refuses_a_pipeline_option_as_train_does(option):
    args = ["--pipeline=synthetic", f"--pipeline_option={option}"]
    planned, trained = run_tfdist("plan", *args), run_tfdist("train", *args)
    assert planned.returncode == trained.returncode == 2
    error = lambda r: r.stderr.strip().splitlines()[-1]  # noqa: E731
    assert error(planned).startswith("tfdist plan: error: --pipeline_option=")
    assert error(planned).replace("tfdist plan", "tfdist train") == error(trained)


@pytest.mark.slow
def test_plan_of_the_flags_of_a_parameter_server_run():
    args = ("--model=mlp", "--pipeline=synthetic", "--pipeline_option=shape=8,8,1",
            "--pipeline_option=num_classes=5", "--strategy=parameter_server", "--num_ps=2",
            "--lr_scaling=sqrt", "--keras=2", "--replicas=1,4")
    p = plan(*args)
    # the recipe's options: its input and classes
    assert (p["input_shape"], p["num_classes"], p["pipeline_options"]) == ([8, 8, 1], 5, {
        "shape": "8,8,1",
        "num_classes": 5
    })
    assert p["input_from_pipeline"] and p["keras"] == 2 and p[
        "lr_scaling"] == "sqrt" and p["lr"] == 0.001  # adam's default
    assert [r["lr"] for r in p["replicas"]] == pytest.approx([0.001, 0.002])
    ps = p["parameter_server"]
    assert (ps["num_ps"], ps["tasks_besides_workers"]) == (2, 3)
    assert ps["ps_task_bytes_average"] == p["ps_bytes"] // 2
    # mlp's largest variable, the 256x128 kernel, with Adam's m and v
    assert ps["ps_task_bytes_at_least"] == 3 * 256 * 128 * 4
