"""Samples per second and the share of step time spent waiting for input, per epoch."""

from __future__ import annotations

import logging
import time
from typing import Callable, Optional

import tensorflow as tf

from tfdist.train.input_wait import time_input_waits, workers

log = logging.getLogger("tfdist")

STALL_WARNING = 0.10  # input waits above this share of step time: the pipeline is the bottleneck


class ThroughputMeter(tf.keras.callbacks.Callback):
    """Global samples/s of each epoch, and `input_wait` of each epoch: the share of training time
    that steps spent waiting for their batch (None where it cannot be timed, see
    tfdist.train.input_wait). With `gather` (an engine's gather_floats: every task's value), the
    share is the largest of all tasks': in synchronous training the others wait for that task in
    the all-reduce instead, so their own input waits hide the stall. Both go into the epoch's
    Keras logs (so History and the verbose=2 line show them); `log_epochs` also logs one line per
    epoch. `warn`: a warning when the share passes `stall_warning`, from the second epoch of a fit
    on (the first also fills the pipeline and traces the step). The steady figures leave out the
    first epoch.

    Every task needs its own meter in the same place of its callback list (the wait variable is
    created inside model.fit, like the model's own).
    """

    def __init__(self,
                 global_batch_size: int,
                 steps_per_epoch: int,
                 stall_warning: float = STALL_WARNING,
                 log_epochs: bool = True,
                 warn: bool = True,
                 gather: Optional[Callable[[list[float]], list[list[float]]]] = None):
        super().__init__()
        self.samples_per_epoch = global_batch_size * steps_per_epoch
        self.stall_warning = stall_warning
        self.log_epochs, self.warn, self.gather = log_epochs, warn, gather
        self.epoch_rates: list[float] = []
        self.epoch_input_wait: list[Optional[float]] = []
        self.epoch_input_wait_per_task: list[list[float]] = []
        self._waited: Optional[tf.Variable] = None
        self._start = self._train_end = self._waited_at_start = 0.0
        self._fit_epochs, self._workers = 0, 1

    def on_train_begin(self, logs=None):
        self._waited = time_input_waits(self.model)
        self._workers = workers(self.model)  # parameter_server: one variable sums all workers
        self._fit_epochs = 0

    def _waited_seconds(self) -> float:
        return float(self._waited.numpy()) if self._waited is not None else 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self._waited_at_start = self._waited_seconds()
        self._train_end = 0.0
        self._start = time.perf_counter()

    def on_test_begin(self, logs=None):
        # Validation inside fit is not training time.
        if self._start and not self._train_end:
            self._train_end = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        seconds = max((self._train_end or time.perf_counter()) - self._start, 1e-9)
        rate = self.samples_per_epoch / seconds
        share = None
        if self._waited is not None:
            waited = (self._waited_seconds() - self._waited_at_start) / self._workers
            share = min(1.0, max(0.0, waited / seconds))
            shares = [row[0] for row in self.gather([share])] if self.gather else [share]
            self.epoch_input_wait_per_task.append(shares)
            share = max(shares)
        self.epoch_rates.append(rate)
        self.epoch_input_wait.append(share)
        if logs is not None:
            logs["samples_per_sec"] = rate
            if share is not None:
                logs["input_wait"] = share
        if self.log_epochs:
            waits = f", waiting for input {share:.1%} of step time" if share is not None else ""
            log.info("epoch %d: %.0f samples/s%s", epoch + 1, rate, waits)
        self._fit_epochs += 1
        if self.warn and self._fit_epochs > 1 and share is not None and share > self.stall_warning:
            shares = self.epoch_input_wait_per_task[-1]
            where = f" on task {shares.index(share)}" if len(shares) > 1 else ""
            log.warning(
                "epoch %d: steps waited for input %.0f%% of the time%s (more than %.0f%%): the "
                "input pipeline is the bottleneck. Cache the parsed data, parallelize or simplify "
                "the map, prefetch, or store the data where it reads faster.", epoch + 1,
                100 * share, where, 100 * self.stall_warning)

    @classmethod
    def for_runtime(cls, rt, batch_size: int, steps_per_epoch: int, **options):
        """The meter for a tfdist.init() runtime: per-replica `batch_size`, shares gathered from
        every task, the warning from the chief (every task needs the meter)."""
        options.setdefault("warn", rt.is_chief)
        options.setdefault("log_epochs", rt.is_chief)
        return cls(rt.global_batch_size(batch_size),
                   steps_per_epoch,
                   gather=rt.engine.gather_floats,
                   **options)

    @property
    def steady_samples_per_sec(self) -> float:
        rates = self.epoch_rates[1:] or self.epoch_rates
        return sum(rates) / len(rates) if rates else 0.0

    @property
    def steady_input_wait(self) -> Optional[float]:
        shares = [s for s in (self.epoch_input_wait[1:] or self.epoch_input_wait) if s is not None]
        return sum(shares) / len(shares) if shares else None
