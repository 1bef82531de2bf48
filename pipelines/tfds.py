"""tfds: any TFDS data set already prepared in a local data_dir (nothing is downloaded; prepare
it with `tfds build NAME --data_dir=DIR` where there is internet).

Options: name (required), train_split ("train"), test_split ("test"), image_key ("image"),
label_key ("label"). uint8 images are scaled to [0, 1].
"""

from __future__ import annotations

import tensorflow as tf

from tfdist.data import DataError, TFDSSource, build_dataset


def _source(split: str, data_dir: str | None, options: dict) -> TFDSSource:
    if split not in ("train", "test"):
        raise DataError(f"tfds has splits 'train' and 'test'; received split={split!r}.")
    name = options.get("name")
    if not name:
        raise DataError("the tfds pipeline needs name=DATASET (a TFDS name, e.g. mnist) and "
                        "data_dir=DIR where it is prepared.")
    return TFDSSource(name, options.get(f"{split}_split", split), data_dir)


def info(data_dir: str | None = None, **options) -> dict:
    train = _source("train", data_dir, options)
    features = train.builder.info.features
    image, label = features[options.get("image_key",
                                        "image")], features[options.get("label_key", "label")]
    splits = train.builder.info.splits
    return {
        "input_shape": tuple(image.shape),
        "num_classes": int(label.num_classes),
        "num_train": splits[options.get("train_split", "train")].num_examples,
        "num_test": splits[options.get("test_split", "test")].num_examples
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
            **options) -> tf.data.Dataset:
    src = _source(split, data_dir, options)
    image_key, label_key = options.get("image_key", "image"), options.get("label_key", "label")
    rest = {
        k: v
        for k, v in options.items()
        if k not in ("name", "train_split", "test_split", "image_key", "label_key")
    }

    def features_labels(sample, _):
        image = sample[image_key]
        if image.dtype == tf.uint8:
            image = tf.cast(image, tf.float32) / 255.0
        return image, tf.cast(sample[label_key], tf.int32)

    return build_dataset(src,
                         input_context,
                         batch_size,
                         map_fn=features_labels,
                         seed=seed,
                         shuffle=shuffle and split == "train",
                         epoch=epoch,
                         repeat=repeat,
                         drop_remainder=drop_remainder,
                         **rest)
