"""One line per epoch for batch logs, where Keras's verbose=2 prints two."""

from __future__ import annotations

import logging
import time

from tfdist.keras_compat.callback import Callback

log = logging.getLogger("tfdist")


def _value(name: str, value: float) -> str:
    if name == "samples_per_sec":
        return f"{value:.0f} samples/s"
    if name == "input_wait":
        return f"input wait {value:.1%}"
    return f"{name} {value:.4f}"


class EpochLine(Callback):
    """`epoch 3/10: loss 0.4087 - accuracy 0.8700 - 3205 samples/s - input wait 1.4% - 0.5 s`:
    every value of the epoch's logs (put it after the callbacks that add theirs); and where
    training starts, once: `training from epoch 1/10, 22 steps each`."""

    def on_train_begin(self, logs=None):
        self._started = False

    def on_epoch_begin(self, epoch, logs=None):
        if not self._started:  # Keras knows the first epoch of a resumed run only now
            self._started = True
            log.info("training from epoch %d/%d, %s steps each", epoch + 1, self.params["epochs"],
                     self.params.get("steps"))
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        # The loss first on both Kerases, as the docs show it: tf-keras's logs start with it,
        # Keras 3's with the compiled metrics (`accuracy 0.9 - loss 0.3`).
        logs = dict(logs or {})
        first = {"loss": logs.pop("loss")} if "loss" in logs else {}
        values = [_value(k, float(v)) for k, v in {**first, **logs}.items()]
        values.append(f"{time.perf_counter() - self._start:.1f} s")
        log.info("epoch %d/%d: %s", epoch + 1, self.params["epochs"], " - ".join(values))
