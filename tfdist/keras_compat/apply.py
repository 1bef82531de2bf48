"""Apply tfdist's corrections to Keras 3 when it is imported, before or after tfdist.

`install()` (called by `import tfdist`) registers them with tfdist.import_hooks for the Keras
module each corrects, and corrects at once a module Keras already imported. No TensorFlow or Keras
import here: the corrections' modules load when Keras does.
"""

from __future__ import annotations

import sys

from tfdist import import_hooks
from tfdist.keras_compat.modules import (ADAPTERS, CSV_LOGGER, EPOCH_ITERATOR, LOSS_SCALE, METRIC,
                                         TRAINER)


def _correct_trainer(trainer) -> None:
    from tfdist.keras_compat import (distributed_input, multi_step, multi_worker, parameter_server,
                                     replica_loss)

    multi_worker.apply(trainer)
    parameter_server.apply(trainer)
    distributed_input.apply(trainer)
    replica_loss.apply(trainer)
    multi_step.apply(trainer)


def _correct_adapters(module) -> None:
    from tfdist.keras_compat import distributed_input

    distributed_input.accept_datasets_from_function(module)


def _correct_epoch_iterator(module) -> None:
    from tfdist.keras_compat import call_steps

    call_steps.apply(module)


def _correct_loss_scale(module) -> None:
    from tfdist.keras_compat import loss_scale

    loss_scale.apply(module)


def _correct_csv_logger(module) -> None:
    from tfdist.keras_compat import csv_logger

    csv_logger.apply(module)


def _correct_metric(module) -> None:
    from tfdist.keras_compat import metric_sync

    metric_sync.apply(module)


# Keras module -> the correction applied to it once executed.
CORRECTIONS = {
    TRAINER: _correct_trainer,
    LOSS_SCALE: _correct_loss_scale,
    ADAPTERS: _correct_adapters,
    EPOCH_ITERATOR: _correct_epoch_iterator,
    CSV_LOGGER: _correct_csv_logger,
    METRIC: _correct_metric,
}


def install() -> None:
    """Correct Keras 3 from now on, and now where it is already imported (idempotent)."""
    for name, correct in CORRECTIONS.items():
        import_hooks.when_imported(name, after=correct)
        if name in sys.modules:
            correct(sys.modules[name])
