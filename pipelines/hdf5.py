"""hdf5: arrays in HDF5 files, read in chunks through h5py (never a whole file in memory).

Either data_dir is a folder written by `tfdist convert --format=hdf5` (its manifest names the
splits and files), or train_files / test_files name HDF5 files (a glob or a comma-separated
list) that hold the datasets x (features) and y (integer labels).

Options: x ("x"), y ("y"), train_files, test_files, num_classes (else max label + 1).
"""

from __future__ import annotations

import glob
import os

import numpy as np
import tensorflow as tf

from tfdist.data import BuildOptions, DataError, HDF5Source, build_dataset
from tfdist.data.manifest import MANIFEST


def _files(pattern) -> list[str]:
    patterns = pattern if isinstance(pattern, (list, tuple)) else str(pattern).split(",")
    files = sorted(f for p in patterns if p for f in (glob.glob(p) or [p]))
    return files


def source(split: str,
           data_dir: str | None = None,
           x: str = "x",
           y: str = "y",
           train_files: str | None = None,
           test_files: str | None = None) -> HDF5Source:
    if split not in ("train", "test"):
        raise DataError(f"hdf5 has splits 'train' and 'test'; received split={split!r}.")
    if data_dir and os.path.exists(os.path.join(data_dir, MANIFEST)):
        return HDF5Source.from_folder(data_dir, split, [x, y])
    pattern = train_files if split == "train" else test_files
    if not pattern:
        raise DataError(f"hdf5 needs data_dir=FOLDER written by `tfdist convert --format=hdf5` "
                        f"or {split}_files=GLOB naming HDF5 files with datasets {x!r} and "
                        f"{y!r} (command line: --pipeline_option={split}_files=GLOB); received "
                        f"data_dir={data_dir!r}.")
    return HDF5Source(_files(pattern), [x, y])


def info(data_dir: str | None = None,
         *,
         x: str = "x",
         y: str = "y",
         train_files: str | None = None,
         test_files: str | None = None,
         num_classes: int | None = None,
         **options) -> dict:
    train = source("train", data_dir, x, y, train_files, test_files)
    test = source("test", data_dir, x, y, train_files, test_files)
    if num_classes is None:
        num_classes = 1 + max(int(np.max(chunk)) for chunk in _labels(train, y))
    return {
        "input_shape": tuple(train.specs[x][0]),
        "num_classes": int(num_classes),
        "num_train": sum(train.counts),
        "num_test": sum(test.counts)
    }


def _labels(src: HDF5Source, name: str, chunk: int = 1 << 16):
    import h5py

    for path in src.files:
        with h5py.File(path, "r") as f:
            for start in range(0, f[name].shape[0], chunk):
                yield f[name][start:start + chunk]


def dataset(split: str,
            input_context: tf.distribute.InputContext,
            batch_size: int,
            *,
            data_dir: str | None = None,
            x: str = "x",
            y: str = "y",
            train_files: str | None = None,
            test_files: str | None = None,
            num_classes: int | None = None,
            **options) -> tf.data.Dataset:
    src = source(split, data_dir, x, y, train_files, test_files)

    def features_labels(sample, _):
        features = sample[x]
        if features.dtype == tf.uint8:
            features = tf.cast(features, tf.float32) / 255.0
        return features, tf.cast(sample[y], tf.int32)

    return build_dataset(src,
                         input_context,
                         batch_size,
                         BuildOptions.for_split(split, **options),
                         map_fn=features_labels)
