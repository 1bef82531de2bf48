"""One random seed on every worker, so that unseeded shuffles give every worker the same order.

Keras's input sharding under MultiWorkerMirroredStrategy (by data: NumPy arrays, a dataset of
tensors) and tfdist's split of a dataset's batches under Horovod (tfdist.distribute.rank_split)
both keep each worker's part of every batch of a pipeline that every worker reads: one sample
once an epoch only where the workers read the same order. A script written for one process
shuffles without a seed (Keras's shuffle of NumPy arrays, `Dataset.shuffle(n)`), and each worker
then draws its own order: measured on digits with two workers, about a quarter of the samples
were read twice an epoch and as many never (tests/distribute/test_samples_read.py), silently.

So `install` gathers, from every training task, the global seed its script set before
tfdist.init() (or none) and a seed the chief draws: one collective that every task joins, seeded
or not, so no task waits in it for one that skipped it. Then, the same decision on every task:
- no task has a seed: the chief's drawn one is set on every task;
- the tasks that have one agree: it is set on those that have none (a script that seeds on one
  rank only);
- they differ (e.g. a seed per rank): nothing the script set is changed, the unseeded take the
  chief's, and a warning names each rank's seed: right for a pipeline each worker shards itself
  (`Dataset.shard`, rt.dataset), wrong for one every worker reads whole.
Each with a log line. The datasets still reshuffle every epoch, the same way on every worker; a
new run draws a new seed. A seed the script sets after tfdist.init() replaces this one. Keras 3
repeats its NumPy shuffle's order every epoch wherever a global seed is set (as it does in one
process with a seed).
"""

from __future__ import annotations

import logging
import secrets
from typing import Optional

log = logging.getLogger("tfdist")

ENGINES = ("multi_worker", "horovod")  # those that shard a pipeline every worker reads
_DRAW_LIMIT = 1 << 24  # the chief's draw: float32 (the engines' gather) holds every integer below
_CHUNK = 1 << 16  # a script's seed (any int64) travels as four 16-bit chunks, each exact in float32


def install(engine) -> Optional[int]:
    """Give every training task of `engine` one global seed where it shards by data over several
    workers (see the module's docstring); returns this task's seed (None: nothing to do)."""
    from tensorflow.python.eager import context

    if engine.name not in ENGINES or engine.world_size < 2:
        return None
    own = context.global_seed()
    draw = secrets.randbelow(_DRAW_LIMIT - 1) + 1 if engine.is_chief else 0
    rows = engine.gather_floats(encode(own, draw))  # every task joins, seeded or not
    seeds = [decode(row) for row in rows]
    seed, different = choose(seeds, int(rows[0][-1]))
    if own is None:
        import tensorflow as tf

        tf.random.set_seed(seed)
    if different:
        _warn_different(seeds)
    else:
        log.info("%s", _said(seeds, seed))
    return own if own is not None else seed


def encode(seed: Optional[int], draw: int) -> list[float]:
    """[has a seed, its four 16-bit chunks (two's complement, low first), the chief's draw]."""
    bits = 0 if seed is None else int(seed) & ((1 << 64) - 1)
    chunks = [float((bits >> (16 * i)) % _CHUNK) for i in range(4)]
    return [float(seed is not None), *chunks, float(draw)]


def decode(row: list[float]) -> Optional[int]:
    """The seed `encode` put in `row`, or None."""
    if not round(row[0]):
        return None
    bits = sum(int(round(c)) << (16 * i) for i, c in enumerate(row[1:5]))
    return bits - (1 << 64) if bits >= 1 << 63 else bits


def choose(seeds: list[Optional[int]], draw: int) -> tuple[int, bool]:
    """(the seed a task without one takes, whether the tasks' own seeds differ), from every
    task's own seed in rank order and the chief's draw."""
    given = {s for s in seeds if s is not None}
    if len(given) == 1:
        return given.pop(), False
    chief = seeds[0]
    return (draw if chief is None else chief), len(given) > 1


def _said(seeds: list[Optional[int]], seed: int) -> str:
    """The log line of a seed every worker has."""
    unseeded = [r for r, s in enumerate(seeds) if s is None]
    why = ("shuffles without a seed then give every worker the same order, which the input's "
           "split over the workers needs to read each sample once an epoch")
    if not unseeded:
        return f"the script's global random seed {seed} kept: the same on every worker"
    if len(unseeded) == len(seeds):
        return (f"random seed {seed} on every worker (tf.random.set_seed; the script sets none): "
                f"{why}; a seed the script sets after tfdist.init() replaces it")
    return (f"random seed {seed} on every worker: the one the script set before tfdist.init() "
            f"on rank {_ranks(r for r, s in enumerate(seeds) if s is not None)}, set by tfdist "
            f"on rank {_ranks(unseeded)}, where it set none: {why}")


def _ranks(ranks) -> str:
    return ", ".join(str(r) for r in ranks)


def _warn_different(seeds: list[Optional[int]]) -> None:
    each = ", ".join(f"rank {r}: {'none' if s is None else s}" for r, s in enumerate(seeds))
    log.warning(
        "the workers' scripts set different global random seeds (%s): a shuffle without a seed "
        "then orders the samples differently on each worker, and where every worker reads the "
        "same input (NumPy arrays, a dataset it does not shard itself) some samples are read "
        "twice an epoch and others never. Fine for a pipeline each worker shards itself "
        "(Dataset.shard, rt.dataset); otherwise set the same seed on every worker, or none "
        "(tfdist then sets one).", each)
