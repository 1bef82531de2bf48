"""HDF5 files as a record source, read through h5py in chunks.

Named datasets (one row per sample, the same names in every file) are read a chunk of rows at a
time, sorted so h5py reads forward, and never loaded whole. Missing names fail before training
with the names the file does have.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import tensorflow as tf

from tfdist.data.errors import DataError
from tfdist.data.indexed import IndexedSource
from tfdist.data.manifest import read_manifest, split_files

_open_lock = threading.Lock()
_open_files: dict[str, object] = {}


def _h5(path: str):
    import h5py

    with _open_lock:
        if path not in _open_files:
            _open_files[path] = h5py.File(path, "r")
        return _open_files[path]


class HDF5Source(IndexedSource):
    """Rows of the datasets `names` in HDF5 `files`; samples are {name: row}."""

    def __init__(self,
                 files: list[str],
                 names: list[str],
                 counts: list[int] | None = None,
                 *,
                 chunk: int = 256):
        import h5py

        if not files:
            raise DataError("HDF5Source got no files.")
        if not names:
            raise DataError("HDF5Source needs the names of the datasets to read (e.g. "
                            "names=['images', 'labels']).")
        found, specs = [], None
        for path in files:
            if not os.path.exists(path):
                raise DataError(f"{path} does not exist.")
            with h5py.File(path, "r") as f:
                missing = [n for n in names if n not in f]
                if missing:
                    have = sorted(k for k in f.keys() if isinstance(f[k], h5py.Dataset))
                    raise DataError(f"{path} has no dataset {', '.join(map(repr, missing))}; it "
                                    f"has {have}. Pass names= from those.")
                rows = {n: f[n].shape[0] for n in names}
                if len(set(rows.values())) != 1:
                    raise DataError(f"{path}: datasets {names} differ in length {rows}; each "
                                    "needs one row per sample.")
                spec = {n: (f[n].shape[1:], f[n].dtype) for n in names}
                if specs is not None and spec != specs:
                    raise DataError(f"{path}: shapes/dtypes {spec} differ from {files[0]}'s "
                                    f"{specs}.")
                specs = spec
                found.append(rows[names[0]])
        if counts is not None and list(counts) != found:
            for path, want, have in zip(files, counts, found):
                if want != have:
                    raise DataError(f"{path} has {have} rows but its manifest lists {want}: the "
                                    "file was truncated or changed after packing; re-pack it "
                                    "with `tfdist convert --overwrite`.")
        super().__init__(files, found)
        self.names, self.chunk = list(names), chunk
        self.specs = {n: (tuple(s), np.dtype(d)) for n, (s, d) in specs.items()}

    @classmethod
    def from_folder(cls, folder: str, split: str, names: list[str] | None = None, **kwargs):
        manifest = read_manifest(folder)
        if manifest["format"] != "hdf5":
            raise DataError(f"{folder} holds {manifest['format']} shards, not hdf5.")
        files, counts = split_files(folder, manifest, split)
        return cls(files, names or list(manifest["features"]), counts, **kwargs)

    reads_in_chunks = True  # prepare() reads rows; parse() cannot run before the cache

    def prepare(self, ds):
        # Rows travel in chunks: one h5py read per chunk and file instead of one per row.
        dtypes = [tf.as_dtype(self.specs[n][1]) for n in self.names]

        def read(rows, seeds, elements):
            values = tf.numpy_function(self._read_rows, [rows], dtypes, stateful=False)
            for v, n in zip(values, self.names):
                v.set_shape((None, *self.specs[n][0]))
            return tf.data.Dataset.from_tensor_slices((tuple(values), seeds, elements))

        return ds.batch(self.chunk).flat_map(read)

    def parse(self, values):
        return dict(zip(self.names, values))

    def _read_rows(self, rows: np.ndarray) -> list[np.ndarray]:
        # h5py reads strictly increasing indices only; a chunk of an endless stream can hold a
        # row twice (the end of one epoch and the start of the next): read each row once.
        unique, inverse = np.unique(rows, return_inverse=True)
        file_of = np.searchsorted(self.starts, unique, side="right") - 1
        parts = {n: [] for n in self.names}
        for f in np.unique(file_of):
            local = unique[file_of == f] - self.starts[f]
            h5 = _h5(self.files[f])
            for n in self.names:
                parts[n].append(h5[n][local])
        return [np.concatenate(parts[n])[inverse] for n in self.names]
