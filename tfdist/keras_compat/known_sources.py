"""Which Keras 3 code tfdist's corrections know: one rule and one table for all of them.

A correction replaces or wraps a Keras function. It is applied to a Keras release only where
that function's source is code tfdist ran the correction on: the sha256 of
`inspect.getsource(function)` (first 16 hex digits) is in RUN. A release whose function changed
is never patched blindly: the correction raises KerasCorrectionUnknown where it would act (several
replicas, multi-worker mode), and Keras's own code runs everywhere else.

RUN records the releases each source was run on (the tests of tests/keras3/ and tests/horovod/
on those releases). `python tools/keras3_sources.py` reads every Keras 3 release's wheel from
PyPI and prints each corrected function's hash. It marks the hashes RUN knows, so a new release
shows at once which corrections it needs run; `python tools/keras3_releases.py` runs them (with
TFDIST_KERAS3_TRY=1 where the code is new to RUN) and prints the lines to add. Releases that share
a source share its entry: e.g. `reduce_per_replica` has one source from Keras 3.3 to 3.15.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os

from tfdist.env_vars import KERAS3_TRY
from tfdist.keras_compat.modules import (ADAPTERS, CSV_LOGGER, EPOCH_ITERATOR, LOSS_SCALE,
                                         TF_KERAS_TRAINING, TRAINER)
from tfdist.errors import TfdistError

# Each corrected function -> {its source's hash: the Keras releases tfdist ran the correction on}.
RUN = {
    # keras.src.backend.tensorflow.trainer
    "TensorFlowTrainer._maybe_symbolic_build": {
        "92a504f5eba9b29f": ("3.15.1", ),  # the source of 3.11 to 3.15
        "181752273e37d689": ("3.8.0", ),  # 3.7 to 3.10
    },
    # keras.src.trainers.data_adapters (tfdist.keras_compat.distributed_input)
    "is_tf_dataset": {
        "e8d15366aabb183a": ("3.8.0", ),  # 3.0 to 3.8
        "63a19bf724ffe56c": ("3.15.1", ),  # 3.9 to 3.15: accepts the dataset already
    },
    "reduce_per_replica": {
        "2e7d54b1e6edc29a": ("3.8.0", "3.15.1"),  # 3.3 to 3.15
    },
    # keras.src.optimizers.loss_scale_optimizer
    "LossScaleOptimizer.check_finite": {
        "b0ce693a4ff0133b": ("3.15.1", ),  # 3.0 to 3.15
    },
    "LossScaleOptimizer._tf_apply": {
        "e702c4db1a0622e3": ("3.15.1", ),  # 3.0 to 3.15
    },
    "LossScaleOptimizer.apply": {
        "1cc61fb4c21edb7a": ("3.15.1", ),  # 3.0 to 3.15 (tfdist.keras_compat.horovod's correction)
    },
    # Copied: tfdist.keras_compat.keras3_adapter.instrument_steps rebuilds its one-step function
    # (unknown code: the input wait is not measured, and the log says why).
    "TensorFlowTrainer.make_train_function": {
        "a9703da4a49beb28": ("3.15.1", ),  # 3.7 to 3.15
    },
    # Wrapped (tfdist.keras_compat.multi_step): with steps_per_execution > 1 under several
    # replicas its function runs the steps in a plain loop.
    "TensorFlowTrainer._make_function": {
        "55eb952812cac1fb": ("3.8.0", ),  # the source of 3.8 to 3.11
        "bb33b7a0da3d2740": ("3.15.1", ),  # 3.12 to 3.15
    },
    # keras.src.trainers.epoch_iterator (tfdist.keras_compat.call_steps): wrapped; notes the steps
    # each call may run, which the plain loops of multi_step and instrument_steps run.
    "EpochIterator._enumerate_iterator": {
        "5b12fbb1202bfd36": ("3.8.0", ),  # 3.7 to 3.10
        "376e3e16a928107a": ("3.15.1", ),  # 3.11 to 3.15
    },
    # Replaced under ParameterServerStrategy by tfdist.keras_compat.parameter_server.fit: the
    # releases whose tests/keras3/test_parameter_server.py passed (docs/compatibility.md).
    "TensorFlowTrainer.fit": {
        "c15636f07c0813fe": ("3.1.1", "3.2.1"),
        "4ebef718bb0e73ec": ("3.3.3", "3.4.1"),
        "ddd40442ffa0c792": ("3.5.0", ),
        "79698a3dc2d90850": ("3.6.0", ),
        "c3c1c38c1c0cbad7": ("3.7.0", "3.8.0", "3.9.2"),
        "12c8c097be1a542e": ("3.10.0", ),
        "946e5ec0372b2063": ("3.11.3", ),
        "6bf8bc1004adaba6": ("3.12.4", "3.13.2", "3.14.1"),
        "a9a6dc02a7ddafa8": ("3.15.1", ),
    },
    # keras.src.callbacks.csv_logger (tfdist.keras_compat.csv_logger): wrapped; 3.15's drops a
    # previous fit's writer itself (the correction finds none to drop).
    "CSVLogger.on_train_begin": {
        "4f842d285755017c": ("3.8.0", ),
        "9e604039df27fad3": ("3.15.1", ),
    },
    # tf-keras (tfdist.keras_compat.tf_keras_adapter): one source from tf-keras 2.16 to 2.21.
    "Model.make_train_function": {
        "2c98267ffc1ce1f0": ("2.18.0", "2.21.0"),  # copied by instrument_steps
    },
}

# The Keras module of each function in RUN (the modules tfdist.keras_compat.apply corrects).
MODULES = {
    "TensorFlowTrainer._maybe_symbolic_build": TRAINER,
    "reduce_per_replica": TRAINER,
    "is_tf_dataset": ADAPTERS,
    "LossScaleOptimizer.check_finite": LOSS_SCALE,
    "LossScaleOptimizer._tf_apply": LOSS_SCALE,
    "LossScaleOptimizer.apply": LOSS_SCALE,
    "TensorFlowTrainer.make_train_function": TRAINER,
    "TensorFlowTrainer.fit": TRAINER,
    "TensorFlowTrainer._make_function": TRAINER,
    "EpochIterator._enumerate_iterator": EPOCH_ITERATOR,
    "CSVLogger.on_train_begin": CSV_LOGGER,
}

# The tf-keras module of each function in RUN that tf-keras defines (read, not corrected).
TF_KERAS_MODULES = {
    "Model.make_train_function": TF_KERAS_TRAINING,
}


class KerasCorrectionUnknown(TfdistError, RuntimeError):
    """This Keras 3 changed code that tfdist corrects: tfdist does not patch it blindly."""


def source_hash(function) -> str:
    return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()[:16]


def known(name: str, function) -> bool:
    """True when `function` (None: this Keras has no such function) is code RUN knows as `name`,
    or any code of a function this Keras has under TFDIST_KERAS3_TRY=1, which
    tools/keras3_releases.py sets to measure a release RUN does not list (not a user setting)."""
    if function is None:
        return False
    return source_hash(function) in RUN[name] or os.environ.get(KERAS3_TRY.name) == "1"


def function_here(name: str):
    """The function `name` of RUN as the Keras 3 of this process defines it (imported here;
    tfdist's corrections unwrapped), None where this Keras has no such function."""
    obj = importlib.import_module(MODULES[name])
    for part in name.split("."):
        obj = getattr(obj, part, None)
    return None if obj is None else inspect.unwrap(obj)


def functions_here() -> dict:
    """function_here of each function of RUN."""
    return {name: function_here(name) for name in MODULES}


def unknown_here() -> list[str]:
    """The functions of RUN whose code in this process's Keras 3 tfdist's corrections were not
    run on (what `tfdist doctor` reports). One this Keras lacks is not listed: only releases
    before 3.5 lack one (the symbolic build), and those are refused under several replicas for
    their loss (tfdist.keras_compat.replica_loss), which the doctor says."""
    return [
        name for name, function in functions_here().items()
        if function is not None and not known(name, function)
    ]


def releases_run(*names: str) -> list[str]:
    """The Keras releases the corrections of `names` were run on, oldest first."""
    found = {v for name in names for versions in RUN[name].values() for v in versions}
    return sorted(found, key=lambda v: tuple(int(p) for p in v.split(".")))


def unknown(names: tuple[str, ...], module: str, version: str, why: str,
            other_fixes: str) -> KerasCorrectionUnknown:
    """The error of a correction whose Keras code (`module`'s `names`) is not code RUN knows."""
    runs = releases_run(*names)
    which = " or ".join(f"`{module}.{name}`" for name in names)
    return KerasCorrectionUnknown(
        f"Keras {version} changed {which}, which tfdist corrects {why}; tfdist ran that "
        f"correction on the code of Keras {', '.join(runs)} only and does not patch code it has "
        f"not run. Fix: install such a Keras (`pip install keras=={runs[-1]}`), or "
        f"{other_fixes}.")
