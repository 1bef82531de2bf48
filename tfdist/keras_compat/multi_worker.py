"""Keras 3's TensorFlow trainer under MultiWorkerMirroredStrategy: two corrections.

Keras 3's `fit` and `evaluate` fail in multi-worker mode at two places, the first hiding the
second (keras-team/keras#20585, tensorflow#72388; measured on Keras 3.15.1 with TensorFlow 2.18.1
and 2.21.0):

1. `symbolic_build_from_local_spec`: before the first step, `_maybe_symbolic_build` mean-reduces
   the first distributed batch with `strategy.reduce(...)` only to learn its shapes and dtypes.
   In multi-worker mode every element of a distributed dataset is a PerReplica, and
   MultiWorkerMirroredStrategy's reduce takes no nested structure: `ValueError: Attempt to convert
   a value (PerReplica:{...})`. Corrected: the shapes and dtypes come from the first local
   replica's element spec (no collective, no batch read: the same shapes on every replica).
2. `reduce_metrics_leaf_by_leaf`: every step's outputs (scalar metric results) are reduced with
   `strategy.reduce("MEAN", v, axis=0)`: `Invalid reduction dimension 0 for input with 0
   dimensions`. Corrected: each leaf is averaged over the replicas (`axis=None`), as Keras does
   under one-worker MirroredStrategy and as tf-keras does under every strategy.

The second applies only in multi-worker mode. The first also under every other strategy (one
worker of MultiWorkerMirroredStrategy, as a one-node `jobs/multi_worker.sbatch` job runs, mirrored,
central_storage, one_device), where Keras's own build works but reads its batch through an
iterator of its own: a dataset that shuffles on each pass then draws one more reshuffle seed when
that iterator passes its first pass, which a resumed run's skipped batches do
(rt.dataset(skip_steps=...)), so the resume trained on other batches than the run it continues
(measured 2026-11-27, Keras 3.8.0 and 3.15.1, one task: weights 0.07 apart;
tests/train/test_user_script.py). Each is tied to the source of the function it corrects
(keras_compat.known_sources): a Keras whose function changed is not patched blindly. In
multi-worker mode it gets KerasCorrectionUnknown, naming the function, the version and the fix;
elsewhere Keras's own code runs unchanged.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging

from tfdist.keras_compat.known_sources import KerasCorrectionUnknown, known, unknown  # noqa: F401
from tfdist.keras_compat.modules import TRAINER

log = logging.getLogger("tfdist")
_MARK = "_tfdist_keras3_correction"


def _unknown(name: str, version: str) -> KerasCorrectionUnknown:
    return unknown((name, ), TRAINER, version,
                   "so that Keras 3 trains under MultiWorkerMirroredStrategy (it fails there "
                   "otherwise, keras-team/keras#20585)",
                   "build the model with tf-keras (`export TF_USE_LEGACY_KERAS=1` and `from "
                   "tensorflow import keras`), or train on one node (--strategy=mirrored)")


def apply(trainer) -> None:
    """Correct `trainer` (the module keras.src.backend.tensorflow.trainer) in place, once."""
    if getattr(trainer.reduce_per_replica, _MARK, False):
        return
    # Called while `import keras` runs (the trainer is among its first modules): the installed
    # distribution's version, not `keras.__version__`, which does not exist yet.
    version = importlib.metadata.version("keras")
    multi_worker = trainer._collective_all_reduce_multi_worker
    cls = trainer.TensorFlowTrainer
    # Keras < 3.5 has no symbolic build: nothing to correct there, and nothing tfdist ran.
    build = getattr(cls, "_maybe_symbolic_build", None)
    reduce = reduce_metrics_leaf_by_leaf(trainer.reduce_per_replica,
                                         multi_worker,
                                         version,
                                         also_known=build is not None and _known_build(build))
    if build is not None:
        cls._maybe_symbolic_build = symbolic_build_from_local_spec(build, multi_worker, version)
    trainer.reduce_per_replica = reduce  # looked up at trace time by the train/test functions
    log.debug("tfdist: Keras %s's TensorFlow trainer corrected for multi-worker mode", version)


def _known_build(function) -> bool:
    return known("TensorFlowTrainer._maybe_symbolic_build", function)


def symbolic_build_from_local_spec(original, multi_worker, version: str):
    name = "TensorFlowTrainer._maybe_symbolic_build"
    is_known = _known_build(original)

    @functools.wraps(original)
    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = self._distribute_strategy
        if iterator is None or strategy is None:
            return original(self, iterator=iterator, data_batch=data_batch)
        if not multi_worker(strategy):  # Keras's own works there: corrected only where known
            if not is_known or not hasattr(iterator, "_distributed_dataset"):
                return original(self, iterator=iterator, data_batch=data_batch)
        elif not is_known:
            raise _unknown(name, version)
        from keras.src import tree

        # The dataset's element spec, not a batch: iterating would start a second iterator of
        # the dataset, whose shuffle (reshuffle_each_iteration) then draws its orders from a
        # seed generator advanced once more, so a run that skips batches to resume would train
        # on other batches than the run it continues.
        spec = iterator._distributed_dataset.element_spec
        first_local = lambda s: getattr(s, "_value_specs", (s, ))[0]  # noqa: E731
        return original(self, data_batch=tree.map_structure(first_local, spec))

    setattr(_maybe_symbolic_build, _MARK, True)
    return _maybe_symbolic_build


def reduce_metrics_leaf_by_leaf(original, multi_worker, version: str, also_known: bool = True):
    """`also_known`: whether the trainer's other correction knows its code (a Keras without it,
    < 3.5, or with code tfdist did not run, is refused here too: the metrics are reduced first)."""
    name = "reduce_per_replica"
    is_known = known(name, original)

    @functools.wraps(original)
    def reduce_per_replica(values, strategy, reduction):
        if reduction not in ("auto", "mean") or not multi_worker(strategy):
            return original(values, strategy, reduction)
        if not is_known:
            raise _unknown(name, version)
        if not also_known:
            raise _unknown("TensorFlowTrainer._maybe_symbolic_build", version)
        from keras.src import tree

        return tree.map_structure(lambda v: strategy.reduce("MEAN", v, axis=None), values)

    setattr(reduce_per_replica, _MARK, True)
    return reduce_per_replica
