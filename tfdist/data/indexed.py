"""Sources whose records are row numbers: NumPy arrays, HDF5 files, synthetic tensors.

Shuffling and sharding move int64 row numbers, not data, so the default shuffle is over the
whole data set (8 bytes a row) and each pipeline reads only the rows it keeps. Row r of the
concatenated files is row r - start[f] of file f.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

_FULL_SHUFFLE_LIMIT = 10_000_000  # rows; beyond this the buffer is bounded


class IndexedSource:
    """Base: files[i] holds counts[i] rows; subclasses turn row numbers into samples."""
    shuffles_files = True

    def __init__(self, files: list[str], counts: list[int]):
        self.files, self.counts = list(files), [int(c) for c in counts]
        self.starts = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)
        self.shuffle_buffer = int(min(self.starts[-1], _FULL_SHUFFLE_LIMIT)) or 1

    def records(self, file_ids, seed, cycle_length) -> tf.data.Dataset:
        ranges = tf.data.Dataset.from_tensor_slices(
            (self.starts[file_ids], self.starts[[i + 1 for i in file_ids]]))
        if seed is not None:
            ranges = ranges.shuffle(len(file_ids), seed=seed, reshuffle_each_iteration=False)
        return ranges.flat_map(lambda a, b: tf.data.Dataset.range(a, b))

    def prepare(self, ds):
        return ds

    def parse(self, row):
        return row


class ArraySource(IndexedSource):
    """In-memory NumPy arrays with a common first dimension (kept as graph constants, so for
    arrays of at most ~1 GB; pack bigger data with `tfdist convert`)."""

    def __init__(self, arrays: dict, name: str = "<arrays>"):
        lengths = {k: len(v) for k, v in arrays.items()}
        if len(set(lengths.values())) != 1:
            from tfdist.data.errors import DataError

            raise DataError(f"{name}: arrays differ in length {lengths}; every array needs one "
                            "row per sample.")
        super().__init__([name], [next(iter(lengths.values()))])
        self.arrays = {k: tf.constant(v) for k, v in arrays.items()}

    def parse(self, row):
        return {k: tf.gather(v, row) for k, v in self.arrays.items()}


class SyntheticSource(IndexedSource):
    """Random tensors made from (seed, row): the same sample every time, no I/O."""

    def __init__(self, num_samples: int, shape, num_classes: int, seed: int = 0, dtype=tf.float32):
        super().__init__(["<synthetic>"], [num_samples])
        self.shape, self.num_classes, self.seed, self.dtype = tuple(shape), num_classes, seed, dtype

    def parse(self, row):
        key = tf.stack([tf.constant(self.seed, tf.int64), row])
        x = tf.random.stateless_uniform(self.shape, seed=key, dtype=self.dtype)
        y = tf.random.stateless_uniform([], seed=key + 1, maxval=self.num_classes, dtype=tf.int64)
        return {"x": x, "y": y}
