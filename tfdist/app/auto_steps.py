"""`tfdist train --steps_per_execution=auto`: the steps of one call of Keras's step function,
chosen from the steps' time in the run's first epoch.

A call has a fixed cost on the host (Python, the function call, the callbacks' hooks): about
0.3 ms here, 13 % of a 2 ms step (docs/benchmarks.md, the spe10/ rows). N steps a call pay it once.
The first epoch of the run trains at one step a call and times its steps (StepClock); then N is
the smallest divisor of the epoch's steps whose call takes TARGET_SECONDS or more, agreed by the
tasks (the slowest task's step time decides, so every task compiles the same N), and the other
epochs train in a second `fit` at N, the model re-compiled with the same optimizer (its state
kept). A divisor: Keras 3 runs every call in full, so only then does every epoch train its own
steps and a stop resume where it stopped; with step checkpoints a divisor of their interval too,
so they land on their steps. Under parameter_server the chief's batch hooks see steps scheduled,
not run: there a step's time is the first epoch's (every scheduled step has run at its end) times
the workers over its steps, and N is at least PARAMETER_SERVER_LEAST. The same weights as at one
step a call (synchronous engines): a call runs the same steps on the same batches, one after the
other; parameter_server's asynchronous updates are never the same twice.

The second `fit` traces its step function anew, which costs about what the first call of the run
took (its tracing). It is paid only where the steps left save more: at CALL_SECONDS a call saved,
`pays`. A short run (the tests' epochs of a few dozen steps) goes on at one step a call in the
same `fit`; a run of hours switches after its first epoch.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from typing import Callable, Optional

from tfdist.env_vars import TEST_AUTO_STEPS_MS, TEST_AUTO_SWITCH_MS
from tfdist.keras_compat.callback import Callback

# The time a call should take at least: the fixed cost of a call, 0.3-0.5 ms here, is then about
# 1 % of it. (At 20 ms, 5 steps a call of 4 ms saved 9 % of the CPU per sample, 10 of them 14 %:
# `make bench`'s speauto/ rows on 2026-11-28, where the warm-up runs both sides at once.)
TARGET_SECONDS = 0.05
MOST = 1000  # steps a call at most (a step of under 20 microseconds)
# The host's cost of a call that N steps a call pay once: 10 steps a call saved 0.25-0.28 ms of
# CPU a step of about 2 ms (make bench's spe10/ rows, 2026-11-28, both Kerases).
CALL_SECONDS = 3e-4
# parameter_server: a closure of N > 1 steps runs Keras's step loop, which costs the parameter
# server and the workers more per call than one step: at 2 steps a closure the run took 4-7 %
# more CPU per sample than at 1 (the parameter server +20 %, 3 runs), at 3 5.9 % less, at 4 11 %
# less (2 runs), at 6 18 % less (bench per-process slices, digits CNN, tf-keras, 2026-11-28).
PARAMETER_SERVER_LEAST = 4


def target_seconds() -> float:
    """TARGET_SECONDS, or the tests' (TFDIST_TEST_AUTO_STEPS_MS)."""
    given = os.environ.get(TEST_AUTO_STEPS_MS.name)
    return float(given) / 1e3 if given else TARGET_SECONDS


def switch_seconds(measured: float) -> float:
    """What a second fit's start costs: `measured` (the run's first call), or the tests'
    (TFDIST_TEST_AUTO_SWITCH_MS)."""
    given = os.environ.get(TEST_AUTO_SWITCH_MS.name)
    return float(given) / 1e3 if given else measured


def saving(count: int, steps_left: int, call: float = CALL_SECONDS) -> float:
    """Seconds `steps_left` steps at `count` a call save over one step a call."""
    return steps_left * (1 - 1 / count) * call


def pays(count: int, steps_left: int, switch: float, call: float = CALL_SECONDS) -> bool:
    """Whether that saving is more than `switch` seconds (a second fit's start)."""
    return count > 1 and saving(count, steps_left, call) > switch


def choose(step_seconds: float,
           steps_per_epoch: int,
           target: float = TARGET_SECONDS,
           checkpoint_steps: int = 0,
           least: int = 1) -> int:
    """The smallest divisor of `steps_per_epoch` (and of `checkpoint_steps`, where step
    checkpoints are written: then they land on their steps, not at the next call's end), at most
    MOST, whose call of that many steps takes `target` seconds or more; the largest one up to MOST
    where none does. Only 1 and divisors of `least` or more are candidates (1 where there is no
    such divisor)."""
    steps = math.gcd(steps_per_epoch, checkpoint_steps) if checkpoint_steps else steps_per_epoch
    candidates = range(1, min(steps, MOST) + 1)
    divisors = [d for d in candidates if steps % d == 0 and (d == 1 or d >= least)]
    for count in divisors:
        if count * step_seconds >= target:
            return count
    return divisors[-1]


class StepClock(Callback):
    """The time between the ends of consecutive steps of fit's first epoch at one step a call:
    the median over the epoch's second half (its first steps trace the function and fill the
    pipeline; under parameter_server, where the hooks see steps scheduled: the epoch's time times
    the workers over its steps); and the time of fit's first call (`first_call_seconds`). At
    that epoch's end `decide(clock)` returns the count for the other epochs: above 1 fit ends
    there (put the clock last: the others' epoch end comes first); 1, fit goes on as it is."""

    def __init__(self, decide: Optional[Callable[["StepClock"], int]] = None):
        super().__init__()
        self._supports_tf_logs = True  # reads no logs: Keras need not fetch them per step
        self._ends: list[float] = []
        self.decide = decide
        self.count: Optional[int] = None  # decided at the first epoch's end
        self.first_call_seconds: Optional[float] = None
        self._begin = self._epoch_begin = 0.0
        self._scheduled: Optional[float] = None  # parameter_server: a step's time, per worker

    def on_train_begin(self, logs=None):
        self._begin = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if scheduled(self.model):
            # Every step scheduled in the epoch has run (fit joined the coordinator): a worker
            # ran its share of them one after the other, the workers at once.
            from tfdist.train.input_wait import workers

            steps = (self.params or {}).get("steps") or 0
            seconds = time.perf_counter() - self._epoch_begin
            self._scheduled = seconds * workers(self.model) / steps if steps >= 4 else None
        # Not where fit is ending already (a preemption's agreed stop: every task alike).
        if self.count is None and self.decide is not None and not self.model.stop_training:
            self.count = self.decide(self)
            if self.count > 1:
                self.model.stop_training = True

    def on_epoch_begin(self, epoch, logs=None):
        self._ends = []
        self._epoch_begin = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        if self.count is None:
            now = time.perf_counter()
            if self.first_call_seconds is None:
                self.first_call_seconds = now - self._begin
            self._ends.append(now)

    def step_seconds(self) -> Optional[float]:
        """The median step time of the last epoch's second half; None under 4 steps timed.
        parameter_server: the last epoch's time per step and worker."""
        if scheduled(self.model):
            return self._scheduled
        later = self._ends[len(self._ends) // 2:]
        if len(later) < 3:
            return None
        return statistics.median(b - a for a, b in zip(later, later[1:]))


def scheduled(model) -> bool:
    """Whether `model`'s fit schedules its steps on workers (parameter_server's coordinator)."""
    return getattr(model, "_cluster_coordinator", None) is not None
