"""`tfdist train --steps_per_execution=auto`: the first epoch at one step a call, timed, the others
at the count chosen, and the same weights as one step a call; the tasks agree on the count; a
stopped run resumes to the same weights. The call's target is set huge here
(TFDIST_TEST_AUTO_STEPS_MS), so the count is the largest divisor of the epoch's 12 steps, 12,
whatever the machine's pace (the choice itself: tests/app/test_auto_steps.py), and the switch is
taken to cost nothing (TFDIST_TEST_AUTO_SWITCH_MS=0): these runs are too short to pay for it. The
default (`auto`) on such a run: one step a call in one fit, said in the log."""

import json
import re

import numpy as np
import pytest

from tests.helpers import TFDIST, WAIT, keras_environ, requires_horovod, run, tf_keras_twin
from tests.train.test_user_script import last_checkpoint, stopped_at_pause
from tfdist.env_vars import TEST_AUTO_STEPS_MS, TEST_AUTO_SWITCH_MS

pytestmark = pytest.mark.slow

STEPS = 12
CHOSEN = "steps_per_execution auto: 12 from epoch 2 on"


def command(model_dir,
            count,
            keras=3,
            epochs=3,
            tasks=1,
            every=0,
            extra=(),
            strategy="multi_worker"):
    train = [
        TFDIST, "train", "--pipeline=digits", f"--keras={keras}", f"--epochs={epochs}",
        f"--steps_per_epoch={STEPS}", f"--steps_per_execution={count}", f"--model_dir={model_dir}",
        f"--checkpoint_steps={every}", *extra
    ]
    if tasks == 1:
        return train
    return [TFDIST, "launch", "-n", str(tasks), f"--strategy={strategy}", "--", *train]


def environ(keras):
    return {TEST_AUTO_STEPS_MS.name: "1e9", TEST_AUTO_SWITCH_MS.name: "0", **keras_environ(keras)}


def trained(model_dir, count, keras=3, **kwargs) -> str:
    r = run(command(model_dir, count, keras, **kwargs), env=environ(keras), timeout=WAIT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout + r.stderr


def assert_same_weights(a, b, keras, least=8):
    """The last checkpoints of runs `a` and `b`: the same step and weights (`least`: the model's
    number of weights at least; the CNN's 8, the MLP's 6)."""
    (meta_a, weights_a), (meta_b, weights_b) = last_checkpoint(a, keras), last_checkpoint(b, keras)
    assert (meta_a["epoch"], meta_a["global_step"]) == (meta_b["epoch"], meta_b["global_step"])
    assert weights_a.keys() == weights_b.keys() and len(weights_a) >= least
    for name in weights_a:  # exact: the same steps on the same batches, one after the other
        np.testing.assert_array_equal(weights_a[name], weights_b[name], err_msg=name)


@pytest.mark.parametrize("keras", [tf_keras_twin(2), 3])
def test_auto_trains_what_one_step_a_call_trains(keras, tmp_path):
    auto, one = tmp_path / "auto", tmp_path / "one"
    out = trained(auto, "auto", keras)
    trained(one, 1, keras)
    assert out.count(CHOSEN) == 1, out[-3000:]
    assert "the median), so a call takes about" in out
    # The first fit logs the run's epochs (it ends after the first), the second goes on.
    assert "training from epoch 1/3, 12 steps each" in out
    assert "training from epoch 2/3, 12 steps each" in out and "resuming" not in out, out[-3000:]
    assert_same_weights(auto, one, keras)
    ran, straight = (json.loads((d / "metrics.json").read_text()) for d in (auto, one))
    assert ran["final"] == straight["final"]
    assert ran["epochs"] == 3 and ran["resumed_from"] is None
    assert (ran["steps_per_execution"], straight["steps_per_execution"]) == (12, 1)
    assert len(ran["epoch_input_wait"]) == 3 and None not in ran["epoch_input_wait"], ran


def test_the_default_stays_at_one_where_the_switch_does_not_pay(tmp_path):
    """No --steps_per_execution: `auto`. 2 epochs of 12 steps left at 12 a call would save about
    7 ms of calls, far less than the run's first call (its tracing, a second or more here), which
    a second fit pays again: one fit at one step a call, the reason in the log."""
    model_dir = tmp_path / "run"
    args = [a for a in command(model_dir, 1) if not a.startswith("--steps_per_execution")]
    r = run(args, env={TEST_AUTO_STEPS_MS.name: "1e9", **keras_environ(3)}, timeout=WAIT)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert re.search(
        r"steps_per_execution auto: 1 for the rest of the run: a step took \S+ ms in epoch 1 "
        r"\(the median\); 12 a call \(.*\) would save about 0\.0 s over the 24 steps left, less "
        r"than a second fit's start costs \(\d+\.\d s, the first call's time\)", out), out[-3000:]
    assert "training from epoch 2/3" not in out  # one fit
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert metrics["epochs"] == 3 and metrics["steps_per_execution"] == 1


def test_auto_under_mixed_float16_on_tf_keras(tmp_path):
    """The second compile takes the LossScaleOptimizer the first made (wrapping the optimizer
    again stopped the run: '"inner_optimizer" is already wrapped by a LossScaleOptimizer'), its
    loss scale and steps kept: the weights of one step a call."""
    auto, one = tmp_path / "auto", tmp_path / "one"
    mixed = ["--mixed_precision=mixed_float16", "--model=mlp"]  # float16 convolutions are slow
    out = trained(auto, "auto", 2, extra=mixed)
    trained(one, 1, 2, extra=mixed)
    assert out.count(CHOSEN) == 1, out[-3000:]
    assert_same_weights(auto, one, 2, least=6)


@pytest.mark.parametrize("strategy", [
    "multi_worker",
    pytest.param("horovod",
                 marks=[requires_horovod, pytest.mark.horovod, pytest.mark.default_stack])
])
def test_tasks_agree_on_the_count(strategy, tmp_path):
    """multi_worker and horovod (Keras 3), 2 tasks: the count is chosen from the slowest task's
    step time (the chief says it), every task compiles it (else their collectives would not
    match), and they train what one step a call trains. Step checkpoints every 6 steps: the count
    divides 6 too, and they land on their steps."""
    auto, one = tmp_path / "auto", tmp_path / "one"
    out = trained(auto, "auto", epochs=2, tasks=2, every=6, strategy=strategy)
    trained(one, 1, epochs=2, tasks=2, every=6, strategy=strategy)
    lines = re.findall(r"\[0\] tfdist: steps_per_execution auto: 6 from epoch 2 on: .*", out)
    assert len(lines) == 1 and "(the slowest task's median)" in lines[0], out[-3000:]
    assert "and of --checkpoint_steps=6" in lines[0]
    saved = re.findall(r"\[0\] tfdist: checkpoint \S+/ckpt-(\d+) ", out)
    assert saved == ["6", "12", "18", "24"], out[-3000:]
    assert_same_weights(auto, one, 3)


@pytest.mark.parametrize("keras", [tf_keras_twin(2), 3])
def test_a_stopped_auto_run_resumes_to_the_same_weights(keras, tmp_path):
    """Stopped at step 6 of its first epoch (one step a call), resumed: the rest of that epoch at
    one step a call, timed again, then 12 a call; the end is the run never stopped's. tf-keras:
    the resumed first fit leaves the model's `_training_state` as tf-keras's fit reads it (it was
    deleted, and the second fit failed with AttributeError)."""
    stopped, straight = tmp_path / "stopped", tmp_path / "straight"
    out = stopped_at_pause(command(stopped, "auto", keras), 6, environ(keras))
    assert "preempted at step 6 of epoch 1" in out and CHOSEN not in out, out[-3000:]
    assert not (stopped / "metrics.json").exists()
    resumed = trained(stopped, "auto", keras)
    assert "resuming from" in resumed and resumed.count(CHOSEN) == 1, resumed[-3000:]
    trained(straight, "auto", keras)
    assert_same_weights(stopped, straight, keras)


@pytest.mark.parametrize("keras", [tf_keras_twin(2), 3])
def test_auto_under_parameter_server(keras, tmp_path):
    """parameter_server (chief, ps, 2 workers): the chief's batch hooks see steps scheduled, so
    the first epoch's time per step and worker decides; the other epochs run 12 steps a closure,
    with the throughput meter's input wait still counted in every epoch. (Asynchronous updates:
    no run's weights are another's, so only the count and the run are checked.)"""
    model_dir = tmp_path / "auto"
    out = trained(model_dir, "auto", keras, tasks=4, strategy="parameter_server")
    lines = re.findall(r"\[0\] tfdist: steps_per_execution auto: 12 from epoch 2 on: .*", out)
    assert len(lines) == 1, out[-3000:]
    assert "(the epoch's time per step and worker: steps scheduled" in lines[0]
    assert "4 or more (parameter_server)" in lines[0]
    assert "training from epoch 2/3, 12 steps each" in out
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert metrics["epochs"] == 3 and metrics["steps_per_execution"] == 12
    assert len(metrics["epoch_input_wait"]) == 3 and None not in metrics["epoch_input_wait"]
