"""digits: scikit-learn's 1,797 handwritten digits (8x8, 10 classes), a real data set that ships
with scikit-learn, so nothing is downloaded.

On first use the images are scaled to [0, 1], split 1437 train / 360 test (stratified, fixed
seed) and packed into TFRecord shards under data_dir/digits-v1; later uses read the shards.
The data set is tiny (~0.4 MB), so every pipeline reads all of it and shards by record: with
shuffle=False, pipeline i of N gets samples i, i+N, ... of the file order, and N workers see the
same global batches as one worker. Copy this file to write a pipeline of your own.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from tfdist.data import BuildOptions, DataError, TFRecordSource, build_dataset, read_manifest
from tfdist.data.paths import cache_dir
from tfdist.data.writers import existing, fingerprint, write_shards

NUM_TEST = 360
SPLIT_SEED = 0
NUM_SHARDS = 2
_FINGERPRINT = fingerprint("digits-v1", NUM_TEST, SPLIT_SEED, NUM_SHARDS)


def packed_dir(data_dir: str | None = None) -> str:
    """The folder of shards, packed on first use (safe when several tasks start at once)."""
    folder = os.path.join(cache_dir(data_dir), "digits-v1")
    if existing(folder, _FINGERPRINT) is None:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        images, labels = load_digits(return_X_y=True)
        images = (images / 16.0).astype(np.float32).reshape(-1, 8, 8, 1)  # pixels are 0..16
        x_train, x_test, y_train, y_test = train_test_split(images,
                                                            labels,
                                                            test_size=NUM_TEST,
                                                            random_state=SPLIT_SEED,
                                                            stratify=labels)

        def samples(x, y):
            for image, label in zip(x, y):
                yield {"image": image, "label": np.int64(label)}

        write_shards(folder, {
            "train": (len(x_train), samples(x_train, y_train)),
            "test": (len(x_test), samples(x_test, y_test))
        },
                     fingerprint=_FINGERPRINT,
                     num_shards=NUM_SHARDS,
                     source="sklearn digits")
    return folder


def info(data_dir: str | None = None, **options) -> dict:
    splits = read_manifest(packed_dir(data_dir))["splits"]
    return {
        "input_shape": (8, 8, 1),
        "num_classes": 10,
        "num_train": splits["train"]["records"],
        "num_test": splits["test"]["records"]
    }


def _features_labels(sample):
    return sample["image"], tf.cast(sample["label"], tf.int32)


def dataset(split: str,
            input_context: tf.distribute.InputContext,
            batch_size: int,
            *,
            data_dir: str | None = None,
            shard_by: str = "record",
            cache: str | None = "memory",
            **options) -> tf.data.Dataset:
    """Per-replica batches of `split` ("train" or "test") for input_context's pipeline.

    **options are tfdist.data.BuildOptions' (its docstring lists them): seed, shuffle, epoch,
    repeat and drop_remainder from tfdist, the others from --pipeline_option; shard_by and cache
    have other defaults here. Only the train split is shuffled.
    """
    if split not in ("train", "test"):
        raise DataError(f"digits has splits 'train' and 'test'; received split={split!r}.")
    source = TFRecordSource.from_folder(packed_dir(data_dir), split)
    parse = source.parse
    source.parse = lambda record: _features_labels(parse(record))  # cached as (image, label)
    return build_dataset(
        source,
        input_context,
        batch_size,
        BuildOptions.for_split(
            split,
            shard_by=shard_by,
            cache=cache,
            cache_parsed=True,  # ~0.4 MB parsed: replay it, never parse twice
            **options))
