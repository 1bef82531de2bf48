"""synthetic: random tensors of a chosen shape, made from (seed, index) with no I/O; for
benchmarks of the model and the strategy without the input pipeline in the way.

Options: shape (default 32,32,3), num_classes (10), num_train (4096), num_test (1024).
"""

from __future__ import annotations

import tensorflow as tf

from tfdist.data import BuildOptions, DataError, SyntheticSource, build_dataset


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
            data_dir: str | None = None,
            shape: str | tuple = "32,32,3",
            num_classes: int = 10,
            num_train: int = 4096,
            num_test: int = 1024,
            **options) -> tf.data.Dataset:
    if split not in ("train", "test"):
        raise DataError(f"synthetic has splits 'train' and 'test'; received split={split!r}.")
    s = _settings(shape, num_classes, num_train, num_test)
    read = BuildOptions.for_split(split, **options)
    # Test samples come from another seed, so they differ from the training samples.
    source = SyntheticSource(s[f"num_{split}"],
                             s["shape"],
                             s["num_classes"],
                             seed=read.seed * 2 + (split == "test"))
    return build_dataset(source,
                         input_context,
                         batch_size,
                         read,
                         map_fn=lambda sample, _: (sample["x"], sample["y"]))
