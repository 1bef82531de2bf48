"""Each rank's part of every global batch, for ranks that each feed one replica (Horovod).

Rank r of N takes the r-th of N equal slices of every global batch, so that step k of every rank
together trains global batch k, the batch one process would train at step k: with the gradients
averaged over the ranks, the same math. Every rank takes the same number of steps and samples
(a rank with a step fewer would wait in the all-reduce of the others' last step): the last,
partial global batch is cut to a multiple of N samples (at most N - 1 samples of an epoch are
dropped), and one of fewer than N samples is dropped.

- NumPy arrays (`array_indices`, `take`): rank r's samples, in the order of the global batches.
- A batched tf.data.Dataset (`split_batches`): every rank reads every batch and keeps its slice,
  so the ranks must read the same batches in the same order (a shuffle with a seed, as
  tf.distribute's auto-sharding by data also needs). One already split per rank (`is_split`: a
  `shard` anywhere in its pipeline, or made by `rt.dataset`) is this rank's already.
"""

from __future__ import annotations

import weakref

import numpy as np

# The arrays `take` made, by id: a fit given them again is split already.
_taken: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()
# Set on a dataset that is one rank's already (split_batches's, the Horovod engine's rt.dataset).
MARK = "_tfdist_rank_split"


def array_indices(n: int, global_batch: int, size: int, rank: int) -> np.ndarray:
    """The indices of rank `rank`'s samples among `n`, batch by batch (`global_batch` divisible by
    `size`)."""
    per = global_batch // size
    full, rest = divmod(n, global_batch)
    tail = rest // size
    whole = (np.arange(full)[:, None] * global_batch + rank * per + np.arange(per)[None, :])
    return np.concatenate([whole.ravel(), full * global_batch + rank * tail + np.arange(tail)])


def dropped(n: int, global_batch: int, size: int) -> int:
    """How many of `n` samples no rank takes (the last batch's rest of a division by `size`)."""
    return (n % global_batch) % size


def take(structure, indices):
    """`structure` (an array, or a list, tuple or dict of them; None stays None) at `indices`."""
    import tensorflow as tf

    def one(array):
        if array is None:
            return None
        part = np.asarray(array)[indices]
        _taken[id(part)] = part
        return part

    return tf.nest.map_structure(one, structure)


def is_taken(structure) -> bool:
    """Whether `structure`'s first array is one `take` made (a rank's part already)."""
    import tensorflow as tf

    leaves = [leaf for leaf in tf.nest.flatten(structure) if leaf is not None]
    return bool(leaves) and _taken.get(id(leaves[0])) is leaves[0]


def is_split(dataset) -> bool:
    """Whether `dataset` is one rank's already: a `shard` in its pipeline, or marked."""
    seen, stack = set(), [dataset]
    while stack:
        ds = stack.pop()
        if id(ds) in seen:
            continue
        seen.add(id(ds))
        if getattr(ds, MARK, False) or type(ds).__name__ in ("_ShardDataset", "ShardDataset"):
            return True
        try:
            stack.extend(ds._inputs())  # tf.data's own walk of a pipeline's inputs
        except Exception:  # noqa: BLE001  (a dataset class without it: nothing to walk)
            pass
    return False


def mark(dataset):
    """`dataset`, marked as one rank's (is_split)."""
    try:
        setattr(dataset, MARK, True)
    except AttributeError:
        pass
    return dataset


def split_batches(dataset, size: int, rank: int):
    """Rank `rank`'s slice of each batch of `dataset`: floor(k / size) samples of a batch of k,
    the `rank`-th such slice; batches of fewer than `size` samples dropped."""
    import tensorflow as tf

    def rows(element):
        return tf.shape(tf.nest.flatten(element)[0])[0]

    def one(element):
        return element[0] if len(element) == 1 else element

    def enough(*element):
        return rows(one(element)) >= size

    def part(*element):
        element = one(element)
        per = rows(element) // size
        return tf.nest.map_structure(lambda t: t[rank * per:(rank + 1) * per], element)

    return mark(dataset.filter(enough).map(part, num_parallel_calls=tf.data.AUTOTUNE))
