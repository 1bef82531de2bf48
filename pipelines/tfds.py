"""tfds: any TFDS data set already prepared in a local data_dir (nothing is downloaded; prepare
it with `tfds build NAME --data_dir=DIR` where there is internet).

Options: name (required), train_split ("train"), test_split ("test"), image_key ("image"),
label_key ("label"), and tfdist.data.BuildOptions'. uint8 images are scaled to [0, 1]. From the
command line: --pipeline=tfds --pipeline_option=name=mnist --data_dir=DIR.
"""

from __future__ import annotations

import tensorflow as tf

from tfdist.data import BuildOptions, DataError, TFDSSource, build_dataset


def _source(split: str, data_dir: str | None, name: str | None, train_split: str,
            test_split: str) -> TFDSSource:
    if split not in ("train", "test"):
        raise DataError(f"tfds has splits 'train' and 'test'; received split={split!r}.")
    if not name:
        raise DataError("the tfds pipeline needs name=DATASET, a TFDS name prepared in data_dir "
                        "(command line: --pipeline_option=name=mnist --data_dir=DIR).")
    return TFDSSource(name, train_split if split == "train" else test_split, data_dir)


def info(data_dir: str | None = None,
         *,
         name: str | None = None,
         train_split: str = "train",
         test_split: str = "test",
         image_key: str = "image",
         label_key: str = "label",
         **options) -> dict:
    train = _source("train", data_dir, name, train_split, test_split)
    features = train.builder.info.features
    image, label = features[image_key], features[label_key]
    splits = train.builder.info.splits
    return {
        "input_shape": tuple(image.shape),
        "num_classes": int(label.num_classes),
        "num_train": splits[train_split].num_examples,
        "num_test": splits[test_split].num_examples
    }


def dataset(split: str,
            input_context: tf.distribute.InputContext,
            batch_size: int,
            *,
            data_dir: str | None = None,
            name: str | None = None,
            train_split: str = "train",
            test_split: str = "test",
            image_key: str = "image",
            label_key: str = "label",
            **options) -> tf.data.Dataset:
    src = _source(split, data_dir, name, train_split, test_split)

    def features_labels(sample, _):
        image = sample[image_key]
        if image.dtype == tf.uint8:
            image = tf.cast(image, tf.float32) / 255.0
        return image, tf.cast(sample[label_key], tf.int32)

    return build_dataset(src,
                         input_context,
                         batch_size,
                         BuildOptions.for_split(split, **options),
                         map_fn=features_labels)
