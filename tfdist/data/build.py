"""From a record source and an InputContext to the batches of one input pipeline.

The stages, in order, each set by an argument or a BuildOptions field:
  records of this pipeline's files (read in parallel, deterministically)
  -> cache (memory, or a file on node-local disk)      cache
  -> shuffle with the seed of the epoch                 shuffle, shuffle_buffer
  -> cut to equal full batches, then shard by record    (the ShardPlan)
  -> decode + map_fn in parallel (AUTOTUNE)             map_fn=
  -> per-replica batch                                  batch_size, drop_remainder
  -> prefetch (AUTOTUNE)                                prefetch
Every shuffle before the shard uses the same seed on every worker, so the pipelines split one
common order and never share a sample. With shuffle=False the order is the file order: files in
manifest order, records in file order, and by record pipeline i gets records i, i+N, ...
"""

from __future__ import annotations

import atexit
import dataclasses
import glob
import os
import tempfile
from typing import Callable, Protocol

import tensorflow as tf

from tfdist.data import sharding
from tfdist.data.context import epoch_seed
from tfdist.data.errors import DataError
from tfdist.data.writers import fingerprint

AUTOTUNE = tf.data.AUTOTUNE
# Distinct element seeds per pipeline: element k of pipeline i gets k * N + i.
MapFn = Callable[[object, tf.Tensor], object]


class RecordSource(Protocol):
    """What `build_dataset` needs from a source (TFRecord files, HDF5 files, arrays, TFDS)."""
    files: list[str]
    counts: list[int]
    shuffle_buffer: int  # default buffer: the whole stream for cheap records, else a bound
    shuffles_files: bool  # whether records() reorders files by the epoch seed

    def records(self, file_ids: list[int], seed: tf.Tensor | None,
                cycle_length: int) -> tf.data.Dataset:
        """The records of these files; in file order when seed is None."""

    def prepare(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        """Sharded (record, epoch seed, element number) -> the same with records ready for
        parse, e.g. a chunked read; identity when records are already the data."""

    def parse(self, record):
        """One record -> one sample, run in the parallel map."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class BuildOptions:
    """How `build_dataset` orders, shards, caches and batches a source; every option has a default.

    Attributes:
        seed: the data order's seed: epoch e is shuffled with a seed made from (seed, e), the
            same on every worker (0).
        shuffle: shuffle every epoch (True); False keeps the file order: files in manifest
            order, records in file order, and by record pipeline i of N gets records i, i+N, ...
        epoch: the first epoch, e.g. that of a resumed run (0).
        repeat: epoch after epoch without end, each in its own order (False); use it with
            steps_per_epoch.
        drop_remainder: equal full batches on every pipeline (True); False keeps the last
            partial batch.
        shard_by: "auto" (by file when every pipeline gets whole files and an even split, else
            by record), "file" or "record".
        shuffle_buffer: records in the shuffle's buffer (None: the source's default, the whole
            stream for cheap records, else a bound).
        cache: None, "memory", "disk" (a file under $TMPDIR or /tmp: node-local on most
            clusters) or a folder for the cache file.
        cache_parsed: parse records before the cache, so later epochs replay parsed samples
            instead of parsing every record again (False; for data whose parsed form fits the
            cache; the order and the samples are the same either way).
        cycle_length: files read at once when shuffling (4).
        deterministic: the same order on every run and every pipeline (True).
        prefetch: prefetch batches (True).
        autotune: tf.data's autotuning model for parallel calls and buffers (False: the
            parallel reads and the map run as many calls as the task has cores, up to 16, and
            each prefetch buffer grows while its consumer waits, tf.data's rule without a model;
            the model's bookkeeping costs CPU on every element: 4-6 % of the image_folder
            pipeline's CPU per sample on 2 cores, bench/input_pipeline.py, 2026-11-28).
    """

    seed: int = 0
    shuffle: bool = True
    epoch: int = 0
    repeat: bool = False
    drop_remainder: bool = True
    shard_by: str = "auto"
    shuffle_buffer: int | None = None
    cache: str | None = None
    cache_parsed: bool = False
    cycle_length: int = 4
    deterministic: bool = True
    prefetch: bool = True
    autotune: bool = False

    def replace(self, **changes) -> BuildOptions:
        """These options with `changes`; a TypeError names any that is no option."""
        names = [f.name for f in dataclasses.fields(self)]
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise TypeError(f"{', '.join(unknown)}: not an option of build_dataset; its options: "
                            f"{', '.join(names)} (tfdist.data.BuildOptions).")
        return dataclasses.replace(self, **changes)

    @classmethod
    def for_split(cls, split: str, **options) -> BuildOptions:
        """A recipe's options for `split`: those given, with shuffling on the train split only
        (the test split is read in file order)."""
        made = cls().replace(**options)
        return dataclasses.replace(made, shuffle=made.shuffle and split == "train")


def build_dataset(source: RecordSource,
                  input_context: tf.distribute.InputContext | None,
                  batch_size: int,
                  options: BuildOptions | None = None,
                  *,
                  map_fn: MapFn | None = None,
                  **changes) -> tf.data.Dataset:
    """Batches of `batch_size` (per replica) for input_context's pipeline, built as `options`
    (a BuildOptions; its docstring lists each option) say.

    map_fn(sample, seed) -> element runs in the parallel map; `seed` is a per-sample int64 [2]
    for tf.image.stateless_random_* so augmentation is reproducible too.
    `changes` give options one by one as keywords (`seed=1, cache="memory"`), the form recipes
    written before BuildOptions use; they change those of `options`.
    """
    o = (options or BuildOptions()).replace(**changes)
    num, pid = ((input_context.num_input_pipelines,
                 input_context.input_pipeline_id) if input_context is not None else (1, 0))
    plan = sharding.plan_shards(source.files,
                                source.counts,
                                num,
                                pid,
                                batch_size,
                                drop_remainder=o.drop_remainder,
                                shard_by=o.shard_by)
    sharding.log_once(plan)
    buffer = o.shuffle_buffer or source.shuffle_buffer
    own = list(plan.own_files)
    read_cycle = o.cycle_length if o.shuffle else 1

    base = None
    parsed = bool(o.cache) and o.cache_parsed
    if parsed and getattr(source, "reads_in_chunks", False):
        raise DataError("cache_parsed=True needs records that parse one by one; this source "
                        "prepares records in chunks: leave cache_parsed off.")
    if o.cache or not source.shuffles_files:
        # A cache replays the first pass, so the stream under it must not depend on the epoch.
        base = source.records(own, None, read_cycle)
        if parsed:
            base = base.map(source.parse, num_parallel_calls=AUTOTUNE, deterministic=True)
        if o.cache:
            base = base.cache(_cache_file(o.cache, plan))

    # A shuffle whose buffer holds the whole stream reads it to its end (so the cache is complete)
    # before the cut to full batches can stop reading.
    whole_shuffle = o.shuffle and buffer >= sum(source.counts[i] for i in own)
    # Parsed samples that need no map: no function runs per record (a few us each on a core the
    # training step shares), the epochs are only shuffles, shards and batches of the cache.
    plain = parsed and map_fn is None

    def one_epoch(e):
        # The order must depend on (seed, epoch) alone, not on a global seed the user set (with
        # one, tf.data also rejects a tensor op seed): clear it in this traced function only.
        tf.compat.v1.get_default_graph().seed = None
        s = epoch_seed(o.seed, e)
        records = base if base is not None else source.records(own, s if o.shuffle else None,
                                                               read_cycle)
        if o.shuffle:
            records = records.shuffle(buffer, seed=s, reshuffle_each_iteration=False)
        if plan.keep is not None:
            records = _keep_first(records, plan.keep, complete=bool(o.cache) and not whole_shuffle)
        if plan.by == "record" and num > 1:
            records = records.shard(num, pid)
        if plain:
            return records
        # (record, epoch seed, element number k * N + i): the parts of a per-sample seed, built
        # by C++ ops only (zip, repeat, range), with no Python function run per record.
        return tf.data.Dataset.zip((records, tf.data.Dataset.from_tensors(s).repeat(),
                                    tf.data.Dataset.range(pid, tf.int64.max, num)))

    # One traced function builds every epoch, endless or not, so both give the same orders.
    last = tf.int64.max if o.repeat else o.epoch + 1
    ds = tf.data.Dataset.range(o.epoch, last).flat_map(one_epoch)
    if not plain:
        # Records queue up ahead of the decode map, so a new epoch's shuffle buffer fills while
        # the map still works on the last one's records.
        ds = source.prepare(ds).prefetch(AUTOTUNE)

        def decode(record, seed_of_epoch, element):
            sample = record if parsed else source.parse(record)
            return map_fn(sample, tf.stack([seed_of_epoch, element])) if map_fn else sample

        ds = ds.map(decode, num_parallel_calls=AUTOTUNE)
    ds = ds.batch(batch_size, drop_remainder=o.drop_remainder)
    if o.repeat:
        # Endless, and said so: under MultiWorkerMirroredStrategy an iterator of unknown length
        # agrees with the other workers in an all-reduce at every step whether all still have data.
        ds = ds.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
    elif getattr(source, "exact_counts", True):
        # The plan knows the batch count: ds.cardinality() then says the steps of one epoch.
        batches = plan.records // batch_size if o.drop_remainder else -(-plan.records // batch_size)
        ds = ds.apply(tf.data.experimental.assert_cardinality(batches))
    if o.prefetch:
        ds = ds.prefetch(AUTOTUNE)
    return ds.with_options(dataset_options(o.deterministic, o.autotune))


def dataset_options(deterministic: bool = True, autotune: bool = False) -> tf.data.Options:
    """The tf.data options of every tfdist pipeline: TensorFlow's own sharding off (tfdist
    shards), a deterministic order unless `deterministic=False`, and tf.data's autotuning model
    only with `autotune=True` (BuildOptions.autotune)."""
    options = tf.data.Options()
    options.autotune.enabled = autotune
    # tfdist shards itself; TensorFlow's AUTO policy would shard again and warn.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    # Pipelines that split one shuffled stream must all produce it in the same order.
    options.deterministic = deterministic
    # One thread per input op leaves the cores to parallel map calls (tf.data performance guide).
    options.threading.max_intra_op_parallelism = 1
    return options


def _keep_first(records: tf.data.Dataset, n: int, complete: bool) -> tf.data.Dataset:
    if not complete:
        return records.take(n)

    # take() would stop reading early, and a cache that was not read to its end is discarded.
    def wanted(k, record):
        return k < n

    def drop_index(k, record):
        return record

    return records.enumerate().filter(wanted).map(drop_index)


def _cache_file(cache: str, plan: sharding.ShardPlan) -> str:
    if cache == "memory":
        return ""
    folder = os.environ.get("TMPDIR", tempfile.gettempdir()) if cache == "disk" else cache
    if not os.path.isdir(folder):
        raise DataError(f"cache={cache!r}: {folder} is not a folder; use 'memory', 'disk' or an "
                        "existing folder on node-local disk.")
    # Per process and plan: tasks on one node must not share a cache file (TF locks it).
    name = os.path.join(
        folder, f"tfdist-cache-{fingerprint(plan.files, plan.own_files)}-"
        f"p{plan.pipeline_id}-{os.getpid()}")
    atexit.register(_remove, name)
    return name


def _remove(prefix: str) -> None:
    for path in glob.glob(glob.escape(prefix) + "*"):
        try:
            os.remove(path)
        except OSError:
            pass
