"""Packing whole sources into shards: image folders, NumPy .npz files, HDF5 files, TFDS splits.

Each packer lists its inputs, fingerprints them (names, sizes, modification times, options) and
calls `write_shards`, so packing the same inputs again is a no-op. `tfdist convert` and the
bundled pipelines both use them.
"""

from __future__ import annotations

import os

import numpy as np

from tfdist.data.errors import DataError
from tfdist.data.writers import fingerprint, write_shards

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
SPLIT_FOLDERS = ("train", "test")


def _stat(path: str) -> tuple:
    st = os.stat(path)
    return (os.path.abspath(path), st.st_size, st.st_mtime_ns)


def _holdout(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train rows, test rows): a fixed random split, rows kept in order within each."""
    if not 0 <= test_fraction < 1:
        raise DataError(f"test_fraction={test_fraction}; expected 0 <= test_fraction < 1.")
    test = np.sort(np.random.default_rng(seed).permutation(n)[:int(round(n * test_fraction))])
    return np.setdiff1d(np.arange(n), test), test


def list_image_folder(root: str, test_fraction: float = 0.2, seed: int = 0):
    """({split: [(path, label)]}, classes). root/CLASS/img.jpg, or root/{train,test}/CLASS/..;
    without split folders, test_fraction of each class goes to test."""
    if not os.path.isdir(root):
        raise DataError(f"image folder {root} does not exist.")
    split_roots = {s: os.path.join(root, s) for s in SPLIT_FOLDERS}
    if not all(os.path.isdir(p) for p in split_roots.values()):
        split_roots = None
    class_root = split_roots["train"] if split_roots else root
    classes = sorted(d for d in os.listdir(class_root)
                     if os.path.isdir(os.path.join(class_root, d)))
    if not classes:
        raise DataError(f"{class_root} has no sub-folders; expected one sub-folder of images per "
                        "class (root/CLASS/image.jpg).")

    def images(folder):
        if not os.path.isdir(folder):
            return []
        return sorted(
            os.path.join(folder, f) for f in os.listdir(folder)
            if f.lower().endswith(IMAGE_SUFFIXES))

    splits = {s: [] for s in SPLIT_FOLDERS}
    for label, name in enumerate(classes):
        if split_roots:
            for s in SPLIT_FOLDERS:
                splits[s] += [(p, label) for p in images(os.path.join(split_roots[s], name))]
        else:
            paths = images(os.path.join(root, name))
            train, test = _holdout(len(paths), test_fraction, seed + label)
            splits["train"] += [(paths[i], label) for i in train]
            splits["test"] += [(paths[i], label) for i in test]
    if not splits["train"]:
        raise DataError(f"{root}: no {'/'.join(IMAGE_SUFFIXES)} images in its class folders.")
    if not splits["test"]:
        del splits["test"]  # test_fraction=0 or an empty test/ folder: a train split only
    return splits, classes


def pack_image_folder(root: str,
                      output: str,
                      *,
                      num_shards: int = 8,
                      test_fraction: float = 0.2,
                      seed: int = 0,
                      overwrite: bool = False,
                      progress: bool = False):
    """Encoded images as they are (decoded in the pipeline) and int labels, into TFRecord."""
    splits, classes = list_image_folder(root, test_fraction, seed)
    fp = fingerprint("image_folder", [[_stat(p), y] for items in splits.values() for p, y in items],
                     num_shards, test_fraction, seed)

    def samples(items):
        for path, label in items:
            with open(path, "rb") as f:
                yield {"image": f.read(), "label": np.int64(label)}

    return write_shards(output, {
        s: (len(items), samples(items))
        for s, items in splits.items()
    },
                        fingerprint=fp,
                        format="tfrecord",
                        num_shards=num_shards,
                        source=os.path.abspath(root),
                        meta={"classes": classes},
                        overwrite=overwrite,
                        progress=progress)


def _array_splits(arrays: dict, test_fraction: float, seed: int) -> dict:
    """{split: {feature: array}} from names like x_train/y_test, else one split cut in two."""
    by_split = {}
    for key, value in arrays.items():
        feature, _, split = key.rpartition("_")
        if not feature or split not in SPLIT_FOLDERS:
            by_split = None
            break
        by_split.setdefault(split, {})[feature] = value
    if by_split:
        return by_split
    n = len(next(iter(arrays.values())))
    if test_fraction == 0:
        return {"train": arrays}
    train, test = _holdout(n, test_fraction, seed)
    return {
        "train": {
            k: v[train]
            for k, v in arrays.items()
        },
        "test": {
            k: v[test]
            for k, v in arrays.items()
        }
    }


def _rows(arrays: dict, chunk: int = 1024):
    n = len(next(iter(arrays.values())))
    for start in range(0, n, chunk):
        block = {k: np.asarray(v[start:start + chunk]) for k, v in arrays.items()}
        for i in range(len(next(iter(block.values())))):
            yield {k: v[i] for k, v in block.items()}


def _check_lengths(arrays: dict, where: str) -> None:
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise DataError(f"{where}: arrays differ in length {lengths}; every array needs one row "
                        "per sample.")


def pack_arrays(path: str,
                output: str,
                *,
                names: list[str] | None = None,
                format="tfrecord",
                num_shards: int = 8,
                test_fraction: float = 0.0,
                seed: int = 0,
                overwrite: bool = False,
                progress: bool = False):
    """A .npz file, or an HDF5 file's datasets `names`. Arrays named FEATURE_train and
    FEATURE_test become those splits; other names make one split, cut by test_fraction."""
    if not os.path.isfile(path):
        raise DataError(f"{path} does not exist.")
    fp = fingerprint("arrays", _stat(path), names, format, num_shards, test_fraction, seed)
    if path.endswith(".npz"):
        with np.load(path) as npz:
            arrays = {k: npz[k] for k in (names or npz.files)}
        return _write_arrays(arrays, path, output, fp, format, num_shards, test_fraction, seed,
                             overwrite, progress)
    import h5py

    with h5py.File(path, "r") as f:
        names = names or sorted(k for k in f.keys() if isinstance(f[k], h5py.Dataset))
        missing = [n for n in names if n not in f]
        if missing:
            raise DataError(f"{path} has no dataset {', '.join(map(repr, missing))}; it has "
                            f"{sorted(f.keys())}. Pass --names from those.")
        # h5py datasets are sliced a chunk at a time by _rows, never read whole.
        arrays = {n: f[n] for n in names}
        if test_fraction:
            arrays = {n: v[()] for n, v in arrays.items()}  # a random split needs random rows
        return _write_arrays(arrays, path, output, fp, format, num_shards, test_fraction, seed,
                             overwrite, progress)


def _write_arrays(arrays, path, output, fp, format, num_shards, test_fraction, seed, overwrite,
                  progress):
    if not arrays:
        raise DataError(f"{path} holds no arrays.")
    splits = _array_splits(arrays, test_fraction, seed)
    for split, group in splits.items():
        _check_lengths(group, f"{path} split {split!r}")
    return write_shards(output, {
        s: (len(next(iter(g.values()))), _rows(g))
        for s, g in splits.items()
    },
                        fingerprint=fp,
                        format=format,
                        num_shards=num_shards,
                        source=os.path.abspath(path),
                        overwrite=overwrite,
                        progress=progress)


def pack_tfds(name: str,
              data_dir: str,
              output: str,
              *,
              splits=("train", "test"),
              format="tfrecord",
              num_shards: int = 8,
              overwrite: bool = False,
              progress: bool = False):
    """Splits of a TFDS data set prepared in data_dir, as flat features (image, label, ...)."""
    from tfdist.data.tfds import TFDSSource

    sources = {s: TFDSSource(name, s, data_dir) for s in splits}
    builder = next(iter(sources.values())).builder
    fp = fingerprint("tfds", name, os.path.abspath(data_dir), str(builder.version), {
        s: src.counts
        for s, src in sources.items()
    }, format, num_shards)

    def samples(split):
        for example in builder.as_dataset(split=split, shuffle_files=False).as_numpy_iterator():
            nested = [k for k, v in example.items() if isinstance(v, dict)]
            if nested:
                raise DataError(f"TFDS {name}: nested features {nested} cannot be packed; "
                                "write a pipeline that reads the TFDS data set directly.")
            yield example

    return write_shards(output, {
        s: (sum(src.counts), samples(s))
        for s, src in sources.items()
    },
                        fingerprint=fp,
                        format=format,
                        num_shards=num_shards,
                        source=f"tfds:{name}@{os.path.abspath(data_dir)}",
                        overwrite=overwrite,
                        progress=progress)
