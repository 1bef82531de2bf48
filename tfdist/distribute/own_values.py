"""This task's own copy of each variable, read without a collective: what a save of one task alone
(a script's `if chief: model.save(...)`) needs under MultiWorkerMirroredStrategy.

Under MultiWorkerMirrored two things in a Keras save wait for every task (measured 2026-11-27,
TensorFlow 2.18, 2 workers; tests/train/test_chief_save.py):
- a variable made under the strategy is made by a collective (the chief broadcasts its initial
  value): Keras 3's save makes a throwaway `Optimizer(1.0)` to learn which attributes to skip
  (keras.src.saving.saving_lib.get_attr_skipset), under tfdist's default strategy;
- a sync-on-read variable (tf-keras's metric totals and counts) read in cross-replica context is
  all-reduced over the replicas (SyncOnReadVariable._get_cross_replica), and tf-keras's save reads
  each variable with `.numpy()`.
`own_copies()` runs its block outside the strategy (default_strategy.outside(): what is made there
is plain) and in TensorFlow's update context of replica 0 (`distribute_lib.UpdateContext`, what a
strategy's `update` enters for each replica; private, TensorFlow 2.16 to 2.21), where a distributed
variable read in cross-replica context gives its copy of this task's first replica. Mirrored
variables (weights, optimizer slots) hold the same value in every copy and on every task; layer
statistics (tf-keras's on-read BatchNormalization moving mean and variance) too, as the engine
averages every copy in place at each epoch end (tfdist.distribute.layer_statistics); any other
sync-on-read variable gives this replica's own part (a metric's partial total, reset by every fit
and evaluate) instead of the reduction over the replicas. Not covered: TensorFlow's checkpoint
saver (tf.train.Checkpoint, the SavedModel format) reduces each sync-on-read variable itself
(values_util.get_on_read_saveable calls `_get_cross_replica`), whatever the context.
"""

from __future__ import annotations

import contextlib

from tfdist.distribute import default_strategy


@contextlib.contextmanager
def own_copies():
    """Inside: no strategy (default_strategy.outside()), and each distributed variable read gives
    this task's copy of its first replica; nothing waits for another task. Eager code only."""
    from tensorflow.python.distribute import distribute_lib

    with default_strategy.outside(), distribute_lib.UpdateContext(0):
        yield
