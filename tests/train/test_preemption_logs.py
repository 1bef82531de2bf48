"""The step-level preemption check and the step checkpoint read no logs: tf-keras must not fetch
them to the host after every step for them (its Callback.__init__ sets _supports_tf_logs False on
the instance, which hid a class attribute)."""

from __future__ import annotations

from tfdist.train.checkpoint import StepCheckpoint
from tfdist.train.preemption import StepPreemptionHandler


class _Engine:
    rank, is_chief = 0, True


def test_the_step_check_takes_tf_logs():
    assert StepPreemptionHandler(_Engine(), several_tasks=True)._supports_tf_logs is True


def test_the_step_checkpoint_takes_tf_logs(tmp_path):
    checkpoint = StepCheckpoint(str(tmp_path), True, {}, save_steps=5)
    assert checkpoint._supports_tf_logs is True
