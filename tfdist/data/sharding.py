"""The sharding plan: which records each input pipeline reads, said in plain words.

By file when every pipeline gets at least one whole file and the files split evenly enough (the
record counts per pipeline differ by at most 5%): each pipeline then reads only its own files,
files i, i+N, i+2N, ... By record otherwise: every pipeline reads all files in the same order
(shuffled the same way, with the same seed) and keeps records i, i+N, i+2N, ... (tf.data
`shard`), so the pipelines still see disjoint samples whose union is the data set.

With drop_remainder, every pipeline is cut to the same number of full batches, because a worker
that runs out of batches first leaves the others waiting in their next all-reduce; the records
cut per epoch are counted and reported.
"""

from __future__ import annotations

import dataclasses
import logging
import os

from tfdist.data.errors import DataError

log = logging.getLogger("tfdist")

SHARD_BY = ("auto", "file", "record")
_EVEN_ENOUGH = 0.05
_logged: set[str] = set()


@dataclasses.dataclass(frozen=True)
class ShardPlan:
    """Which records one input pipeline reads (by file or by record) and what is cut; its
    `describe()` is the line tfdist logs."""

    by: str  # "file" or "record"
    num_pipelines: int
    pipeline_id: int
    files: tuple[str, ...]
    counts: tuple[int, ...]
    own_files: tuple[int, ...]  # indices into files that this pipeline reads
    records: int  # records this pipeline yields per epoch
    keep: int | None  # records kept per epoch: of the global stream (by record), of own (by file)
    dropped: int  # records per epoch that no pipeline yields (drop_remainder)
    reason: str

    @property
    def total(self) -> int:
        return sum(self.counts)

    def describe(self) -> str:
        n, n_files = self.num_pipelines, len(self.files)
        head = f"{n_files} file{'s' * (n_files != 1)} ({self.total} records) over {n} input " \
               f"pipeline{'s' * (n != 1)}: "
        if self.by == "file":
            each = len(self.files) // n
            body = (f"{each}{'+' * (len(self.files) % n > 0)} file{'s' * (each != 1)} each, by "
                    f"file; pipeline {self.pipeline_id} "
                    f"reads {', '.join(os.path.basename(self.files[i]) for i in self.own_files)}"
                    f" and yields {self.records} records per epoch")
        else:
            body = (f"{self.reason}, so by record: every pipeline reads all files and keeps every "
                    f"{_ordinal(n)} record; " if n > 1 else "")
            body += f"pipeline {self.pipeline_id} yields {self.records} records per epoch"
        if self.dropped:
            body += (f"; {self.dropped} records per epoch left out so every pipeline has the same "
                     "number of full batches")
        return head + body + "."


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def plan_shards(files,
                counts,
                num_pipelines: int,
                pipeline_id: int,
                batch_size: int,
                *,
                drop_remainder: bool = True,
                shard_by: str = "auto") -> ShardPlan:
    """The ShardPlan of pipeline `pipeline_id` of `num_pipelines` over `files` with their record
    `counts` (shard_by: auto, file or record; see the module docstring)."""
    files, counts = tuple(files), tuple(int(c) for c in counts)
    if shard_by not in SHARD_BY:
        raise DataError(f"shard_by={shard_by!r}; expected one of {SHARD_BY}.")
    if batch_size < 1:
        raise DataError(f"batch_size={batch_size}; expected a per-replica batch size >= 1.")
    total = sum(counts)
    where = files[0] if len(files) == 1 else f"{len(files)} files ({files[0]}, ...)"
    if total < num_pipelines:
        raise DataError(f"{where} hold{'s' * (len(files) == 1)} {total} records but there are "
                        f"{num_pipelines} input pipelines (workers): some would get no data and "
                        "training would hang. Use fewer workers or more data.")
    per_file_pipeline = [sum(counts[j::num_pipelines]) for j in range(num_pipelines)]
    if len(files) < num_pipelines:
        reason = "fewer files than pipelines"
    elif max(per_file_pipeline) - min(per_file_pipeline) > _EVEN_ENOUGH * max(per_file_pipeline):
        reason = (f"by file the pipelines would get {min(per_file_pipeline)} to "
                  f"{max(per_file_pipeline)} records, too uneven")
    else:
        reason = ""
    by = shard_by if shard_by != "auto" else ("record" if reason else "file")
    if by == "file" and len(files) < num_pipelines:
        raise DataError(f"shard_by='file' with {len(files)} files and {num_pipelines} input "
                        "pipelines: some pipelines would get no file. Write at least "
                        f"{num_pipelines} shards (tfdist convert --shards) or use "
                        "shard_by='record' or 'auto'.")
    reason = reason or "shard_by='record' asked for"
    global_batch = num_pipelines * batch_size
    if by == "file":
        own = tuple(range(pipeline_id, len(files), num_pipelines))
        mine = per_file_pipeline[pipeline_id]
        keep = min(per_file_pipeline) // batch_size * batch_size if drop_remainder else None
        records = mine if keep is None else keep
        dropped = 0 if keep is None else total - num_pipelines * keep
    else:
        own = tuple(range(len(files)))
        keep = total // global_batch * global_batch if drop_remainder else None
        usable = total if keep is None else keep
        records = len(range(pipeline_id, usable, num_pipelines))
        dropped = total - usable
    if drop_remainder and records == 0:
        raise DataError(f"{where}: {total} records over {num_pipelines} input pipelines leave "
                        f"no full batch of batch_size={batch_size} per pipeline. Lower the batch "
                        "size, use fewer workers, or set drop_remainder=False.")
    return ShardPlan(by, num_pipelines, pipeline_id, files, counts, own, records, keep, dropped,
                     reason)


def log_once(plan: ShardPlan) -> None:
    """Log the plan the first time this process builds it (Keras rebuilds datasets); a single
    pipeline that loses nothing is news only with --verbosity=1."""
    text = plan.describe()
    if text not in _logged:
        _logged.add(text)
        routine = plan.num_pipelines == 1 and not plan.dropped
        log.log(logging.DEBUG if routine else logging.INFO, "%s", text)
