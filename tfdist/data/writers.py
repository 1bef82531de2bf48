"""Pack samples into TFRecord or HDF5 shards plus a manifest, atomically.

Everything is written into a temporary sibling folder and renamed into place at the end, so two
processes packing the same data at once (two tasks on first use of a cache) never see half a
folder: the first rename wins and the other discards its copy. Re-packing inputs whose
fingerprint matches the existing manifest does nothing.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import sys
import tempfile
from typing import Iterable

import numpy as np

from tfdist.data import features as features_lib
from tfdist.data.errors import DataError
from tfdist.data.manifest import MANIFEST, read_manifest, sha256, write_manifest

FORMATS = ("tfrecord", "hdf5")
_SUFFIX = {"tfrecord": "tfrecord", "hdf5": "h5"}


def fingerprint(*parts) -> str:
    """A short hash of JSON-able inputs (file names, sizes, mtimes, options)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def existing(folder: str, fp: str) -> dict | None:
    """The manifest in `folder` if it was written from inputs with fingerprint `fp`."""
    if os.path.exists(os.path.join(folder, MANIFEST)):
        manifest = read_manifest(folder)
        if manifest.get("fingerprint") == fp:
            return manifest
    return None


def write_shards(folder: str,
                 splits: dict[str, tuple[int, Iterable[dict]]],
                 *,
                 fingerprint: str,
                 format: str = "tfrecord",
                 num_shards: int = 1,
                 source: str = "",
                 meta: dict | None = None,
                 overwrite: bool = False,
                 progress: bool = False) -> tuple[dict, bool]:
    """Write each split {name: (num_samples, samples)} into `num_shards` shards of contiguous
    samples. Returns (manifest, written); written is False when `folder` already held the same
    data."""
    if format not in FORMATS:
        raise DataError(f"format={format!r}; expected one of {FORMATS}.")
    if num_shards < 1:
        raise DataError(f"num_shards={num_shards}; expected at least 1.")
    manifest = existing(folder, fingerprint)
    if manifest is not None:
        return manifest, False
    if os.path.exists(os.path.join(folder, MANIFEST)) and not overwrite:
        raise DataError(f"{folder} already holds data packed from other inputs or options; "
                        "pass --overwrite (overwrite=True) to replace it, or choose another "
                        "output folder.")
    parent = os.path.dirname(os.path.abspath(folder))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(folder)}.tmp-", dir=parent)
    try:
        total = sum(n for n, _ in splits.values())
        bar = _progress(total, progress, os.path.basename(folder))
        manifest = {
            "format": format,
            "fingerprint": fingerprint,
            "source": source,
            "meta": meta or {},
            "splits": {}
        }
        spec = None
        for split, (count, samples) in splits.items():
            samples = iter(samples)
            first = next(samples, None)
            if first is None:
                raise DataError(f"split {split!r} of {source or folder} has no samples.")
            spec = spec or features_lib.spec_from_sample(first)
            shards = _write_split(tmp, split, count, itertools.chain([first], samples), spec,
                                  format, num_shards, bar)
            manifest["splits"][split] = {
                "records": sum(s["records"] for s in shards),
                "shards": shards
            }
        bar.close()
        manifest["features"] = spec
        write_manifest(tmp, manifest)
        return _publish(tmp, folder, fingerprint, overwrite), True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _progress(total: int, enabled: bool, name: str):
    from tqdm import tqdm

    return tqdm(total=total, disable=not enabled, unit=" samples", desc=name, file=sys.stderr)


def _write_split(tmp, split, count, samples, spec, format, num_shards, bar) -> list[dict]:
    num_shards = max(1, min(num_shards, count))
    bounds = [count * k // num_shards for k in range(num_shards + 1)]
    shards = []
    for k in range(num_shards):
        name = f"{split}-{k:05d}-of-{num_shards:05d}.{_SUFFIX[format]}"
        size = bounds[k + 1] - bounds[k]
        chunk = itertools.islice(samples, size)
        path = os.path.join(tmp, name)
        written = (_write_tfrecord if format == "tfrecord" else _write_hdf5)(path, chunk, size,
                                                                             spec, bar)
        if written != size:
            raise DataError(f"split {split!r}: the source announced {count} samples but ran out "
                            f"after {bounds[k] + written}.")
        shards.append({
            "file": name,
            "records": size,
            "bytes": os.path.getsize(path),
            "sha256": sha256(path)
        })
    if next(samples, None) is not None:
        raise DataError(f"split {split!r}: the source yielded more than the {count} samples it "
                        "announced.")
    return shards


def _write_tfrecord(path, samples, size, spec, bar) -> int:
    import tensorflow as tf

    n = 0
    with tf.io.TFRecordWriter(path) as writer:
        for sample in samples:
            features_lib.check_sample(sample, spec, f"sample {n} of {path}")
            writer.write(features_lib.encode_example(sample, spec))
            n += 1
            bar.update(1)
    return n


def _write_hdf5(path, samples, size, spec, bar, block: int = 1024) -> int:
    import h5py

    n = 0
    with h5py.File(path, "w") as f:
        datasets = {}
        for name, feature in spec.items():
            if feature["kind"] == "bytes":
                dtype = h5py.vlen_dtype(np.uint8)
                datasets[name] = f.create_dataset(name, (size, ), dtype=dtype)
            else:
                datasets[name] = f.create_dataset(name, (size, *feature["shape"]),
                                                  dtype=feature["dtype"])
        # Rows go out in blocks: one h5py call per block, not per sample.
        buffer = []
        for sample in samples:
            features_lib.check_sample(sample, spec, f"sample {n} of {path}")
            buffer.append(sample)
            n += 1
            bar.update(1)
            if len(buffer) == block:
                _flush(datasets, spec, buffer, n - len(buffer))
                buffer = []
        _flush(datasets, spec, buffer, n - len(buffer))
    return n


def _flush(datasets, spec, rows, start) -> None:
    if not rows:
        return
    for name, feature in spec.items():
        if feature["kind"] == "bytes":
            for i, row in enumerate(rows):
                value = row[name].encode() if isinstance(row[name], str) else bytes(row[name])
                datasets[name][start + i] = np.frombuffer(value, np.uint8)
        else:
            datasets[name][start:start + len(rows)] = np.stack([r[name] for r in rows])


def _publish(tmp: str, folder: str, fp: str, overwrite: bool) -> dict:
    manifest = read_manifest(tmp)
    if os.path.isdir(folder) and os.listdir(folder):
        theirs = existing(folder, fp)
        if theirs is not None:
            return theirs  # another process packed the same data first
        if not overwrite:
            raise DataError(f"{folder} is not empty; pass --overwrite (overwrite=True) to "
                            "replace it, or choose another output folder.")
        trash = tempfile.mkdtemp(prefix=f".{os.path.basename(folder)}.old-",
                                 dir=os.path.dirname(os.path.abspath(folder)))
        os.rename(folder, os.path.join(trash, "old"))
        shutil.rmtree(trash, ignore_errors=True)
    elif os.path.isdir(folder):
        os.rmdir(folder)
    try:
        os.rename(tmp, folder)
    except OSError:
        theirs = existing(folder, fp)
        if theirs is None:
            raise
        return theirs  # lost the race to a process writing the same data
    return manifest
