"""image_folder: a folder of JPEG/PNG images, one sub-folder per class (root/CLASS/img.jpg, or
root/train/CLASS/... and root/test/CLASS/...).

The encoded images are packed once into TFRecord shards (`tfdist convert --source=root
--output=DIR`, or automatically on first use with source=root) and decoded, resized and
augmented (random flip and crop, from per-sample seeds) in the parallel map of the pipeline.

Options: source (the image folder), image_size (64), augment (True for train), num_shards (8),
test_fraction (0.2, when the folder has no train/test sub-folders), and tfdist.data.BuildOptions'.
data_dir: a folder written by `tfdist convert`, else where packed copies are cached.
"""

from __future__ import annotations

import os

import tensorflow as tf

from tfdist.data import BuildOptions, DataError, TFRecordSource, build_dataset, read_manifest
from tfdist.data.manifest import MANIFEST
from tfdist.data.packers import pack_image_folder
from tfdist.data.paths import cache_dir
from tfdist.data.writers import fingerprint

IMAGE_SIZE = 64


def packed_dir(data_dir: str | None = None, source: str | None = None, **pack_options) -> str:
    if data_dir and os.path.exists(os.path.join(data_dir, MANIFEST)) and not source:
        return data_dir
    if not source:
        raise DataError("image_folder needs source=IMAGE_FOLDER (one sub-folder of images per "
                        "class; command line: --pipeline_option=source=IMAGE_FOLDER) or "
                        f"data_dir=FOLDER written by `tfdist convert`; received "
                        f"data_dir={data_dir!r}.")
    folder = os.path.join(cache_dir(data_dir),
                          f"image_folder-{fingerprint(os.path.abspath(source))}")
    pack_image_folder(source, folder, **pack_options)  # a no-op when the images are unchanged
    return folder


def info(data_dir: str | None = None,
         *,
         source: str | None = None,
         image_size: int = IMAGE_SIZE,
         num_shards: int = 8,
         test_fraction: float = 0.2,
         **options) -> dict:
    folder = packed_dir(data_dir, source, num_shards=num_shards, test_fraction=test_fraction)
    manifest = read_manifest(folder)
    size = int(image_size)
    return {
        "input_shape": (size, size, 3),
        "num_classes": len(manifest["meta"]["classes"]),
        "num_train": manifest["splits"]["train"]["records"],
        "num_test": manifest["splits"]["test"]["records"]
    }


def decode(sample, seed, image_size: int = IMAGE_SIZE, augment: bool = True):
    """Encoded image -> float image in [0, 1] of image_size², and an int32 label."""
    image = tf.io.decode_image(sample["image"], channels=3, expand_animations=False)
    image = tf.image.resize(image, [image_size, image_size])
    if augment:
        image = tf.image.stateless_random_flip_left_right(image, seed)
        pad = image_size // 8
        image = tf.image.resize_with_crop_or_pad(image, image_size + 2 * pad, image_size + 2 * pad)
        image = tf.image.stateless_random_crop(image, [image_size, image_size, 3], seed=seed + 1)
    return image / 255.0, tf.cast(sample["label"], tf.int32)


def dataset(split: str,
            input_context: tf.distribute.InputContext,
            batch_size: int,
            *,
            data_dir: str | None = None,
            source: str | None = None,
            image_size: int = IMAGE_SIZE,
            augment: bool | None = None,
            num_shards: int = 8,
            test_fraction: float = 0.2,
            **options) -> tf.data.Dataset:
    if split not in ("train", "test"):
        raise DataError(f"image_folder has splits 'train' and 'test'; received split={split!r}.")
    folder = packed_dir(data_dir, source, num_shards=num_shards, test_fraction=test_fraction)
    augment = split == "train" if augment is None else augment
    size = int(image_size)
    return build_dataset(TFRecordSource.from_folder(folder, split),
                         input_context,
                         batch_size,
                         BuildOptions.for_split(split, **options),
                         map_fn=lambda sample, s: decode(sample, s, size, augment))
