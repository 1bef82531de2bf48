"""One random seed on every worker where the script sets none, so that unseeded shuffles give
every worker the same order.

Keras's input sharding under MultiWorkerMirroredStrategy (by data: NumPy arrays, a dataset of
tensors) and tfdist's split of a dataset's batches under Horovod (tfdist.distribute.rank_split)
both keep each worker's part of every batch of a pipeline that every worker reads: one sample
once an epoch only where the workers read the same order. A script written for one process
shuffles without a seed (Keras's shuffle of NumPy arrays, `Dataset.shuffle(n)`), and each worker
then draws its own order: measured on digits with two workers, about a quarter of the samples
were read twice an epoch and as many never (tests/distribute/test_samples_read.py), silently.

So `install` draws a seed on the chief, hands it to every worker (one collective: a sum over the
replicas where only the chief's first replica adds its value; Horovod: its broadcast) and sets it
as TensorFlow's global seed before the script builds its input, with a log line saying so. The
datasets still reshuffle every epoch, the same way on every worker; a new run draws a new seed.
A seed the script sets itself (keras.utils.set_random_seed, tf.random.set_seed) after
tfdist.init() replaces this one, and one set before it is kept: the script's choice either way.
Keras 3 repeats its NumPy shuffle's order every epoch wherever a global seed is set (as it does
in one process with a seed).
"""

from __future__ import annotations

import logging
import secrets
from typing import Optional

log = logging.getLogger("tfdist")

ENGINES = ("multi_worker", "horovod")  # those that shard a pipeline every worker reads
_LIMIT = 1 << 24  # float32 holds every integer below it: the collective sums float32


def install(engine) -> Optional[int]:
    """Set one global seed on every training task of `engine` where it shards by data over
    several workers and the script set none; returns the seed set (None: nothing set)."""
    from tensorflow.python.eager import context

    if engine.name not in ENGINES or engine.world_size < 2:
        return None
    if context.global_seed() is not None:
        log.info(
            "the script's global random seed %s kept: it must be the same on every worker, "
            "or each worker shuffles its own order and reads other samples than its part",
            context.global_seed())
        return None
    mine = secrets.randbelow(_LIMIT - 1) + 1 if engine.is_chief else 0
    seed = _horovod_broadcast(mine) if engine.name == "horovod" else _collective(engine, mine)
    import tensorflow as tf

    tf.random.set_seed(seed)
    log.info(
        "random seed %d on every worker (tf.random.set_seed; the script sets none): shuffles "
        "without a seed then give every worker the same order, which the input's split over "
        "the workers needs to read each sample once an epoch; a seed the script sets after "
        "tfdist.init() replaces it", seed)
    return seed


def _collective(engine, mine: int) -> int:
    import tensorflow as tf

    strategy = engine.strategy

    def contribute():
        first = tf.equal(tf.distribute.get_replica_context().replica_id_in_sync_group, 0)
        return tf.where(first, tf.constant(float(mine)), tf.constant(0.0))

    @tf.function
    def chief_value():
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(contribute), axis=None)

    return int(chief_value().numpy())


def _horovod_broadcast(mine: int) -> int:
    import horovod.tensorflow as hvd

    return int(hvd.broadcast_object(mine, root_rank=0, name="tfdist_seed"))
