"""The step-level preemption check reads no logs: tf-keras must not fetch them to the host after
every step for it (its Callback.__init__ sets _supports_tf_logs False on the instance, which hid a
class attribute)."""

from __future__ import annotations

from tfdist.train.preemption import StepPreemptionHandler


class _Engine:
    rank, is_chief = 0, True


def test_the_step_check_takes_tf_logs():
    assert StepPreemptionHandler(_Engine(), several_tasks=True)._supports_tf_logs is True
