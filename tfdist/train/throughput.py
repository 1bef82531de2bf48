"""Samples per second, per epoch, as a Keras callback."""

from __future__ import annotations

import time

import tensorflow as tf


class ThroughputMeter(tf.keras.callbacks.Callback):
    """Global samples/s of each epoch; `steady_samples_per_sec` leaves out the first epoch, which
    also traces and compiles the step function."""

    def __init__(self, global_batch_size: int, steps_per_epoch: int):
        super().__init__()
        self.samples_per_epoch = global_batch_size * steps_per_epoch
        self.epoch_rates: list[float] = []
        self._start = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        rate = self.samples_per_epoch / max(time.perf_counter() - self._start, 1e-9)
        self.epoch_rates.append(rate)
        if logs is not None:
            logs["samples_per_sec"] = rate

    @property
    def steady_samples_per_sec(self) -> float:
        rates = self.epoch_rates[1:] or self.epoch_rates
        return sum(rates) / len(rates) if rates else 0.0
