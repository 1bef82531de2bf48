"""`--steps_per_execution=auto`'s choice and the flag's values (no training: tests/train/
test_auto_steps.py trains with it)."""

import pytest

from tfdist.app.auto_steps import CALL_SECONDS, MOST, TARGET_SECONDS, StepClock, choose, pays
from tfdist.app.config import AUTO, TrainConfig
from tfdist.errors import ConfigError


def test_the_smallest_divisor_whose_call_takes_the_target():
    # 44 steps: divisors 1, 2, 4, 11, 22, 44.
    assert choose(0.002, 44, 0.02) == 11  # 4 x 2 ms = 8 ms < 20 ms <= 11 x 2 ms
    assert choose(0.005, 44, 0.02) == 4  # exactly 20 ms
    assert choose(0.025, 44, 0.02) == 1  # a step alone takes longer
    assert choose(0.0001, 44, 0.02) == 44  # none reaches it: the largest, a call per epoch
    assert choose(0.002, 47, 0.02) == 47  # a prime: one call per epoch
    assert choose(1e-9, 5000, 0.02) == max(d for d in range(1, MOST + 1) if 5000 % d == 0)
    assert choose(0.002, 44) == choose(0.002, 44, TARGET_SECONDS)
    # Step checkpoints every 10 steps: a divisor of gcd(44, 10) = 2, so they land on their steps.
    assert choose(0.002, 44, 0.02, checkpoint_steps=10) == 2
    assert choose(0.002, 60, 0.02, checkpoint_steps=30) == 10
    assert choose(0.002, 60, 0.02, checkpoint_steps=0) == 10


def test_the_switch_is_made_where_the_steps_left_pay_for_it():
    # 10 a call saves 0.9 x 0.3 ms a step: 1 s of tracing is paid back after 3,704 steps.
    assert CALL_SECONDS == 3e-4
    assert not pays(10, 3700, 1.0) and pays(10, 3705, 1.0)
    assert not pays(1, 10**9, 0.0)  # one step a call saves nothing
    assert pays(12, 24, 0.0)  # a switch that costs nothing
    assert not pays(12, 24, 2.0)  # the tests' runs: 24 steps left, a second of tracing


def test_the_setting():
    assert TrainConfig().steps_per_execution == AUTO  # the default
    assert TrainConfig(steps_per_execution="auto").steps_per_execution == AUTO
    assert TrainConfig(steps_per_execution=" AUTO ").steps_per_execution == AUTO
    assert TrainConfig(steps_per_execution="8").steps_per_execution == 8
    assert TrainConfig(steps_per_execution=3).steps_per_execution == 3
    for bad in ("0", "-2", "four", "2.5", ""):
        with pytest.raises(ConfigError, match=f"steps_per_execution={bad!r}: expected a count"):
            TrainConfig(steps_per_execution=bad)


class _Clocked(StepClock):
    """StepClock fed given times instead of the clock's."""

    def feed(self, ends):
        self.on_epoch_begin(0)
        for t in ends:
            self._ends.append(t)


def test_the_clock_takes_the_median_of_the_epochs_second_half():
    clock = _Clocked()
    # 10 steps: the first half slow (tracing), the second 2 ms apart with one outlier.
    clock.feed([1.0, 1.5, 1.6, 1.7, 1.8, 2.000, 2.002, 2.004, 2.030, 2.032])
    assert clock.step_seconds() == pytest.approx(0.002)
    clock.feed([0.0, 1.0, 1.001])  # too few steps to time
    assert clock.step_seconds() is None


def test_parameter_server_counts_start_at_least():
    """parameter_server: 2 and 3 steps a closure are no candidates (they cost more than 1 or
    little less, auto_steps.PARAMETER_SERVER_LEAST); 1 where no divisor of 4 or more exists."""
    assert choose(0.02, 60, 0.05) == 3
    assert choose(0.02, 60, 0.05, least=4) == 4
    assert choose(0.06, 60, 0.05, least=4) == 1  # a step alone takes long enough
    assert choose(0.001, 6, 0.05, least=4) == 6
    assert choose(0.001, 3, 0.05, least=4) == 1
