"""Input contexts and the per-epoch shuffle seed.

The seed of epoch e is a pure function of (seed, e), computed the same way on every worker, so a
run resumed at epoch k shuffles exactly as the uninterrupted run did at epoch k.
"""

from __future__ import annotations

import tensorflow as tf

from tfdist.data.errors import DataError

# A prime multiplier keeps (seed, epoch) pairs of ordinary size apart.
_EPOCH_STRIDE = 1_000_003


def epoch_seed(seed, epoch):
    """The shuffle seed of `epoch`, as a tf.int64 scalar (works on ints and tensors)."""
    return (tf.cast(seed, tf.int64) * _EPOCH_STRIDE + tf.cast(epoch, tf.int64))


def make_input_context(num_input_pipelines: int,
                       input_pipeline_id: int,
                       num_replicas_in_sync: int = 1) -> tf.distribute.InputContext:
    """The InputContext a strategy would hand to a dataset function; for Horovod: (size, rank,
    replicas in sync = size)."""
    if num_input_pipelines < 1:
        raise DataError(f"num_input_pipelines={num_input_pipelines}: expected at least 1.")
    if not 0 <= input_pipeline_id < num_input_pipelines:
        raise DataError(f"input_pipeline_id={input_pipeline_id}: expected 0 to "
                        f"{num_input_pipelines - 1} for num_input_pipelines={num_input_pipelines}.")
    if num_replicas_in_sync < 1:
        raise DataError(f"num_replicas_in_sync={num_replicas_in_sync}: expected at least 1.")
    return tf.distribute.InputContext(num_input_pipelines=num_input_pipelines,
                                      input_pipeline_id=input_pipeline_id,
                                      num_replicas_in_sync=num_replicas_in_sync)
