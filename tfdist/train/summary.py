"""MODEL_DIR/metrics.json: what a training run was and how it went, written by the chief."""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Optional

from tfdist.files import write_json
from tfdist.keras_compat import adapter
from tfdist.keras_compat.callback import Callback

METRICS = "metrics.json"
log = logging.getLogger("tfdist")
_METER_KEYS = ("samples_per_sec", "input_wait")  # per epoch in the meter's lists instead


class RunSummary(Callback):
    """Collects the run's facts (`facts`: strategy, replicas, batch, ...), the meter's figures,
    the resume point and the last epoch's logs into `metrics`; when fit ends unpreempted the chief
    writes them to `path` (None: nothing is written). `add` puts more in afterwards (test
    results, say) and writes again. Put it after the meter and the checkpoint callbacks. With
    `warn` (the chief) it warns at fit's start where the epochs train other than their
    steps_per_epoch (Keras 3 runs each call of steps_per_execution steps in full)."""

    def __init__(self,
                 path: Optional[str],
                 facts: dict[str, Any],
                 meter=None,
                 checkpoint=None,
                 preemption=None,
                 warn: bool = False):
        super().__init__()
        self.warn = warn
        self.path, self.facts = path, dict(facts)
        self.meter, self.checkpoint, self.preemption = meter, checkpoint, preemption
        self.metrics: dict[str, Any] = {}
        self._last: dict[str, float] = {}
        # False: a later fit goes on with this run, and writes (tfdist train's first epoch at
        # steps_per_execution auto): a file written before would say the run ended there.
        self.write_at_end = True

    def on_train_begin(self, logs=None):
        if not self.warn:
            return
        overrun = adapter(self.model).execution_misaligned(self.model,
                                                           self.params.get("steps"),
                                                           consequence="")
        if overrun:
            log.warning("%s", overrun)

    def on_epoch_end(self, epoch, logs=None):
        self._last = {k: float(v) for k, v in (logs or {}).items() if k not in _METER_KEYS}

    def on_train_end(self, logs=None):
        if not self._last and self.path and os.path.exists(self.path):
            # Resumed past its last epoch: nothing trained, the finished run's metrics stay.
            with open(self.path) as f:
                self.metrics = json.load(f)
            return
        meter, saver = self.meter, self.checkpoint
        self.metrics = dict(
            self.facts,
            epochs=self.params.get("epochs"),
            steps_per_epoch=self.params.get("steps"),
            resumed_from=list(saver.resumed_from) if saver and saver.resumed_from else None,
            loss_scale=_loss_scale(self.model.optimizer),
            final=dict(self._last),
        )
        if meter is not None:
            self.metrics.update(
                samples_per_sec=meter.steady_samples_per_sec,
                epoch_samples_per_sec=meter.epoch_rates,
                # Share of step time spent waiting for the input batch: the most-waiting task's
                # (parameter_server: the workers' mean); None where not timed.
                input_wait=meter.steady_input_wait,
                epoch_input_wait=meter.epoch_input_wait,
                epoch_input_wait_per_task=meter.epoch_input_wait_per_task)
        if self.write_at_end and (self.preemption is None or self.preemption.preempted_at is None):
            self._write()

    def add(self, **values: Any) -> dict[str, Any]:
        """Merge `values` into the metrics (dicts one level deep, e.g. final=...) and write."""
        for key, value in values.items():
            if isinstance(value, dict) and isinstance(self.metrics.get(key), dict):
                self.metrics[key] = dict(self.metrics[key], **value)
            else:
                self.metrics[key] = value
        self._write()
        return self.metrics

    def _write(self) -> None:
        if self.path:
            write_json(self.path, self.metrics)


def _loss_scale(optimizer) -> Optional[float]:
    """The dynamic loss scale Keras put in place for mixed_float16 (its value now), else None."""
    return adapter(optimizer).loss_scale(optimizer)


def metrics_path(model_dir: str) -> str:
    return os.path.join(model_dir, METRICS)
