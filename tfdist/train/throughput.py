"""Samples per second and the share of step time spent waiting for input, per epoch."""

from __future__ import annotations

import logging
import time
from typing import Callable, Optional

from tfdist.keras_compat.callback import Callback
from tfdist.train.input_wait import count_steps, workers

log = logging.getLogger("tfdist")

STALL_WARNING = 0.10  # input waits above this share of step time: the pipeline is the bottleneck
# ... and at least this long in the epoch: on a busy node a short epoch's scheduling delays alone
# pass the share (`make demo` beside the test suite, 2026-11-27: 10-18 % of 0.3 s epochs, 70 ms).
# The epoch line still shows every share.
STALL_MIN_SECONDS = 1.0


class ThroughputMeter(Callback):
    """Global samples/s of each epoch, and `input_wait` of each epoch: the share of training time
    that steps spent waiting for their batch. Both are counted inside the step
    (tfdist.train.input_wait); where that cannot be done the share is None and the rate comes from
    `global_batch_size` (None without it). With `gather` (an engine's gather_floats: one row per
    task), the samples are every task's and the share is the largest of all tasks': in synchronous
    training the others wait for that task in the gradients' all-reduce instead, so their own
    input waits hide the stall (unless the tasks agree on each batch: `batches_agreed`). Both go
    into the epoch's Keras logs (so History and the verbose=2 line show them). `warn`: a warning
    when the share passes `stall_warning` and the wait lasted STALL_MIN_SECONDS or more, from the
    second epoch of a fit on (the first also fills the pipeline and traces the step). The steady
    figures leave out the first epoch of each fit (a fit traces its step function anew).
    `batches_agreed`: the tasks may agree on each batch inside its fetch (several multi_worker
    tasks: see stall_message), so a task's wait can be for another task.

    Every task needs its own meter in the same place of its callback list (the counters are
    created inside model.fit, like the model's own variables).
    """

    def __init__(self,
                 global_batch_size: Optional[int] = None,
                 stall_warning: float = STALL_WARNING,
                 warn: bool = True,
                 gather: Optional[Callable[[list[float]], list[list[float]]]] = None,
                 batches_agreed: bool = False):
        super().__init__()
        self.global_batch_size = global_batch_size
        self.batches_agreed = batches_agreed
        self.stall_warning, self.warn, self.gather = stall_warning, warn, gather
        self.epoch_rates: list[Optional[float]] = []
        self.epoch_samples: list[Optional[float]] = []  # every task's, as counted in the steps
        self.epoch_input_wait: list[Optional[float]] = []
        self.epoch_input_wait_per_task: list[list[float]] = []
        self.epoch_seconds: list[float] = []  # the chief's training time of each epoch
        self._steady: list[bool] = []  # per epoch: not the first of its fit
        self._counters = None
        self._start = self._train_end = 0.0
        self._at_start = (0.0, 0.0)
        self._fit_epochs, self._workers = 0, 1

    def on_train_begin(self, logs=None):
        self._counters = count_steps(self.model, (self.params or {}).get("steps"))
        self._workers = workers(self.model)  # parameter_server: one variable sums all workers
        self._fit_epochs = 0

    def samples_counted(self) -> Optional[float]:
        """The samples this fit's steps have taken so far (None before the counters exist, or
        where there are none): the watchdog's sign of progress inside a call of many steps."""
        counters = self._counters
        return None if counters is None else counters.read()[1]

    def _totals(self) -> tuple[float, float]:
        if self._counters is None:
            return 0.0, 0.0
        return self._counters.read()

    def on_epoch_begin(self, epoch, logs=None):
        self._at_start = self._totals()
        self._train_end = 0.0
        self._start = time.perf_counter()

    def on_test_begin(self, logs=None):
        # Validation inside fit is not training time.
        if self._start and not self._train_end:
            self._train_end = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        seconds = max((self._train_end or time.perf_counter()) - self._start, 1e-9)
        share, rate, counted = None, None, None
        if self._counters is not None:
            waited, samples = (now - then for now, then in zip(self._totals(), self._at_start))
            share = min(1.0, max(0.0, waited / self._workers / seconds))
            rows = self.gather([share, samples]) if self.gather else [[share, samples]]
            shares = [row[0] for row in rows]
            self.epoch_input_wait_per_task.append(shares)
            share, counted = max(shares), sum(row[1] for row in rows)
            rate = counted / seconds
        elif self.global_batch_size:
            rate = self.global_batch_size * self.params["steps"] / seconds
        self.epoch_rates.append(rate)
        self.epoch_samples.append(counted)
        self.epoch_input_wait.append(share)
        self.epoch_seconds.append(seconds)
        self._steady.append(self._fit_epochs > 0)
        if logs is not None:
            if rate is not None:
                logs["samples_per_sec"] = rate
            if share is not None:
                logs["input_wait"] = share
        self._fit_epochs += 1
        if (self.warn and self._fit_epochs > 1 and share is not None and share > self.stall_warning
                and share * seconds >= STALL_MIN_SECONDS):
            log.warning(
                "%s",
                stall_message(epoch + 1, self.epoch_input_wait_per_task[-1], self.stall_warning,
                              self.batches_agreed))

    def _steady_mean(self, values: list) -> Optional[float]:
        """The mean of `values` (one per epoch) over the epochs after each fit's first (all of
        them where every epoch is a fit's first)."""
        steady = [v for v, later in zip(values, self._steady) if later] or values
        known = [v for v in steady if v is not None]
        return sum(known) / len(known) if known else None

    @property
    def steady_samples_per_sec(self) -> Optional[float]:
        return self._steady_mean(self.epoch_rates)

    @property
    def steady_input_wait(self) -> Optional[float]:
        return self._steady_mean(self.epoch_input_wait)


def stall_message(epoch: int, shares: list[float], threshold: float, batches_agreed: bool) -> str:
    """The warning of an epoch whose largest input-wait share (of `shares`, one per task) passed
    `threshold`. Under MultiWorkerMirroredStrategy the workers agree on every batch of an input
    that may end in a partial batch (Keras's NumPy input; tf.distribute's get_next_as_optional
    all-reduces "has data" inside the fetch), so a task also waits there for a slower one: measured
    (2026-11-27, 2 workers, rank 1 sleeping 50 ms after each step) rank 0 "waited for input"
    70-78 % of each epoch. Where some task waited little (at most `threshold`, or under half the
    most) the wait need not be the pipeline's: both readings are named, with the task that waited
    least. (A slow pipeline on any task makes every task wait about as long: the others wait for
    it at the agreement.)"""
    share = max(shares)
    where = f" on task {shares.index(share)}" if len(shares) > 1 else ""
    head = (f"epoch {epoch}: steps waited for input {100 * share:.0f}% of the time{where} (more "
            f"than {100 * threshold:.0f}%)")
    pipeline = ("Cache the parsed data, parallelize or simplify the map, prefetch, or store the "
                "data where it reads faster.")
    least = min(shares)
    if not batches_agreed or len(shares) < 2 or (least > threshold and least >= share / 2):
        return f"{head}: the input pipeline is the bottleneck. {pipeline}"
    slow = shares.index(least)
    return (f"{head}; task {slow} waited {100 * least:.0f}%. Under multi_worker the tasks agree on "
            f"each batch of an input with a last partial batch (NumPy arrays in fit), so this is "
            f"either a wait for task {slow}, which is slower (a busier node, a slower device, "
            f"more work per step), or, with an input that needs no agreement (rt.dataset, a "
            f"repeated dataset), task {shares.index(share)}'s own input pipeline: {pipeline}")
