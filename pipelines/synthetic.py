"""synthetic: random tensors of a chosen shape, made from (seed, index) with no I/O; for
benchmarks of the model and the strategy without the input pipeline in the way.

Options: shape (default 32,32,3), num_classes (10), num_train (4096), num_test (1024).
"""

from __future__ import annotations

import tensorflow as tf

from tfdist.data import DataError, SyntheticSource, build_dataset


def _settings(shape, num_classes, num_train, num_test) -> dict:
    if isinstance(shape, str):  # from a command line: "32,32,3"
        shape = [int(s) for s in shape.split(",") if s]
    return {
        "shape": tuple(int(s) for s in shape),
        "num_classes": int(num_classes),
        "num_train": int(num_train),
        "num_test": int(num_test)
    }


def info(data_dir: str | None = None,
         *,
         shape: str | tuple = "32,32,3",
         num_classes: int = 10,
         num_train: int = 4096,
         num_test: int = 1024,
         **options) -> dict:
    s = _settings(shape, num_classes, num_train, num_test)
    return {
        "input_shape": s["shape"],
        "num_classes": s["num_classes"],
        "num_train": s["num_train"],
        "num_test": s["num_test"]
    }


def dataset(split: str,
            input_context: tf.distribute.InputContext,
            batch_size: int,
            *,
            seed: int = 0,
            shuffle: bool = True,
            epoch: int = 0,
            repeat: bool = False,
            drop_remainder: bool = True,
            data_dir: str | None = None,
            shape: str | tuple = "32,32,3",
            num_classes: int = 10,
            num_train: int = 4096,
            num_test: int = 1024,
            **options) -> tf.data.Dataset:
    if split not in ("train", "test"):
        raise DataError(f"synthetic has splits 'train' and 'test'; received split={split!r}.")
    s = _settings(shape, num_classes, num_train, num_test)
    # Test samples come from another seed, so they differ from the training samples.
    source = SyntheticSource(s[f"num_{split}"],
                             s["shape"],
                             s["num_classes"],
                             seed=seed * 2 + (split == "test"))
    return build_dataset(source,
                         input_context,
                         batch_size,
                         map_fn=lambda sample, _: (sample["x"], sample["y"]),
                         seed=seed,
                         shuffle=shuffle and split == "train",
                         epoch=epoch,
                         repeat=repeat,
                         drop_remainder=drop_remainder,
                         **options)
