"""TFRecord files as a record source.

Every file is read with its expected record count (from the manifest, or counted once when there
is none). A corrupt record (DataLossError) ends the readable part of a file; tfdist notices the
short count at the end of the file and stops with an error naming it, or, with
skip_corrupt=True, logs and counts the records lost and goes on.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable

import tensorflow as tf

from tfdist.data import features as features_lib
from tfdist.data.errors import DataError
from tfdist.data.manifest import read_manifest, split_files

log = logging.getLogger("tfdist")

_READ_BUFFER = 8 << 20  # bytes; large sequential reads suit shared file systems
_CHECK_BLOCK = 256  # records counted at once
_skipped_lock = threading.Lock()
_skipped: dict[str, int] = {}


def skipped_records() -> dict[str, int]:
    """Records lost to corrupt data so far in this process, per file (skip_corrupt=True)."""
    with _skipped_lock:
        return dict(_skipped)


def count_records(path: str) -> int:
    try:
        return int(
            tf.data.TFRecordDataset(path).reduce(tf.constant(0, tf.int64), lambda n, _: n + 1))
    except tf.errors.DataLossError as e:
        raise DataError(f"{path}: corrupt record while counting its records ({e.message.strip()})"
                        ". Re-create the file, or drop it from the list.") from None
    except tf.errors.NotFoundError:
        raise DataError(f"{path} does not exist.") from None


class TFRecordSource:
    """Records of TFRecord files; `parse` maps a serialized record to a sample."""
    shuffles_files = True

    def __init__(self,
                 files: list[str],
                 counts: list[int] | None = None,
                 *,
                 parse: Callable | None = None,
                 feature_spec: dict | None = None,
                 skip_corrupt: bool = False,
                 shuffle_buffer: int = 10_000):
        if not files:
            raise DataError("TFRecordSource got no files.")
        for path in files:
            if not os.path.exists(path):
                raise DataError(f"{path} does not exist.")
        if counts is None:
            # No manifest: one pass now gives the plan its counts and the reader its check.
            counts = [count_records(path) for path in files]
        if parse is None and feature_spec is not None:
            parse = _spec_parser(feature_spec)
        self.files, self.counts = list(files), list(counts)
        self.parse = parse or (lambda record: record)
        self.skip_corrupt = skip_corrupt
        self.exact_counts = not skip_corrupt  # skipping makes an epoch shorter than planned
        self.shuffle_buffer = shuffle_buffer

    @classmethod
    def from_folder(cls, folder: str, split: str, **kwargs) -> "TFRecordSource":
        """The shards of `split` in a folder written by tfdist (manifest checked)."""
        manifest = read_manifest(folder)
        if manifest["format"] != "tfrecord":
            raise DataError(f"{folder} holds {manifest['format']} shards, not tfrecord; read it "
                            "with the hdf5 source or re-pack with --format=tfrecord.")
        files, counts = split_files(folder, manifest, split)
        kwargs.setdefault("feature_spec", manifest["features"])
        return cls(files, counts, **kwargs)

    def records(self, file_ids, seed, cycle_length) -> tf.data.Dataset:
        files = tf.data.Dataset.from_tensor_slices(
            ([self.files[i]
              for i in file_ids], tf.constant([self.counts[i] for i in file_ids], tf.int64)))
        if seed is not None:
            files = files.shuffle(len(file_ids), seed=seed, reshuffle_each_iteration=False)
        cycle = max(1, min(cycle_length, len(file_ids)))
        if cycle == 1:
            return files.interleave(self._read_checked, cycle_length=1)
        return files.interleave(self._read_checked,
                                cycle_length=cycle,
                                num_parallel_calls=tf.data.AUTOTUNE,
                                deterministic=True)

    def prepare(self, ds):
        return ds

    def _read_checked(self, path, expected):
        # ignore_errors turns a DataLossError into the end of that file; a marker block after
        # the last one then carries the count read, checked against the expected count.
        # Records are counted in blocks so the check costs little per record.
        blocks = tf.data.TFRecordDataset(
            path, buffer_size=_READ_BUFFER).ignore_errors().batch(_CHECK_BLOCK)
        marked = blocks.map(lambda b: (b, False)).concatenate(
            tf.data.Dataset.from_tensors((tf.constant([], tf.string), True)))
        counted = marked.scan(tf.constant(0, tf.int64), _count)
        checked = counted.filter(lambda b, end, n: self._check(path, expected, end, n))
        return checked.map(lambda b, end, n: b).unbatch()

    def _check(self, path, expected, end, n):

        def at_end():
            if self.skip_corrupt:
                return tf.py_function(_report_skipped, [path, expected, n], tf.bool)
            message = tf.strings.format(
                "tfdist: {} yielded {} records, its manifest lists {}: a corrupt record "
                "(DataLossError) ends the readable part of the file. Re-create or re-copy the "
                "file, or pass skip_corrupt=True to skip the unreadable records.",
                (path, n, expected))
            check = tf.debugging.Assert(tf.equal(n, expected), [message], summarize=1)
            with tf.control_dependencies([check]):
                return tf.constant(False)

        return tf.cond(end, at_end, lambda: tf.constant(True))


def _count(n, block_end):
    block, end = block_end
    n = n + tf.size(block, out_type=tf.int64)
    return n, (block, end, n)


def _report_skipped(path, expected, n):
    path, lost = path.numpy().decode(), int(expected) - int(n)
    if lost > 0:
        with _skipped_lock:
            _skipped[path] = _skipped.get(path, 0) + lost
        log.warning("skipped %d corrupt or unreadable records of %d in %s "
                    "(skip_corrupt=True).", lost, int(expected), path)
    return False


def _spec_parser(spec: dict) -> Callable:
    """A feature spec in the manifest's form, or a dict of tf.io.FixedLenFeature."""
    if all(isinstance(v, dict) for v in spec.values()):
        return features_lib.parser(spec)
    return lambda record: tf.io.parse_single_example(record, spec)
