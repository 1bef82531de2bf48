"""Small real data sets for the data tests: TFRecord and HDF5 shards written by tfdist, and a
TFDS data set built locally by a GeneratorBasedBuilder (no download, no mock)."""

from __future__ import annotations

import os

import numpy as np

import tfdist  # noqa: F401  (before TensorFlow)
import tensorflow as tf
import tensorflow_datasets as tfds

from tfdist.data import HDF5Source, TFRecordSource, build_dataset, make_input_context
from tfdist.data.writers import write_shards


def samples(n: int, start: int = 0):
    for i in range(start, start + n):
        yield {"id": np.int64(i), "x": np.full((3, ), i, np.float32)}


def write_ids(folder: str, n: int, shards: int, format: str = "tfrecord") -> str:
    """Samples with ids 0..n-1 in file order, in `shards` shards of contiguous ids."""
    write_shards(folder, {"train": (n, samples(n))},
                 fingerprint=f"{n}-{shards}-{format}",
                 format=format,
                 num_shards=shards)
    return folder


def write_image_folder(root, per_class: int = 20, size: int = 12) -> str:
    """root/a and root/b: dark and bright images (JPEG and PNG), a class learnt at once."""
    for label, value in (("a", 40), ("b", 210)):
        os.makedirs(os.path.join(root, label), exist_ok=True)
        for i in range(per_class):
            pixels = tf.fill([size, size, 3], tf.constant(value + (i % 5) * 3, tf.uint8))
            png = i % 2 == 0
            encoded = tf.io.encode_png(pixels) if png else tf.io.encode_jpeg(pixels)
            with open(os.path.join(root, label, f"{i}.{'png' if png else 'jpg'}"), "wb") as f:
                f.write(encoded.numpy())
    return str(root)


def write_uneven_hdf5(folder: str, sizes: list[int]) -> list[str]:
    """HDF5 files of the given row counts (ids continue from file to file)."""
    import h5py

    os.makedirs(folder, exist_ok=True)
    paths, start = [], 0
    for k, size in enumerate(sizes):
        path = os.path.join(folder, f"part-{k}.h5")
        with h5py.File(path, "w") as f:
            f["id"] = np.arange(start, start + size, dtype=np.int64)
            f["x"] = np.repeat(np.arange(start, start + size, dtype=np.float32)[:, None], 3, 1)
        paths.append(path)
        start += size
    return paths


class TinyIds(tfds.core.GeneratorBasedBuilder):
    """Examples with an id, a 4x4 image and a label; split sizes from the builder config."""
    VERSION = tfds.core.Version("1.0.0")
    NUM_TRAIN = 120
    NUM_TEST = 20

    def _info(self):
        return tfds.core.DatasetInfo(builder=self,
                                     features=tfds.features.FeaturesDict({
                                         "id":
                                         tf.int64,
                                         "image":
                                         tfds.features.Image(shape=(4, 4, 1)),
                                         "label":
                                         tfds.features.ClassLabel(num_classes=3),
                                     }))

    def _split_generators(self, dl_manager):
        return {
            "train": self._generate_examples(0, self.NUM_TRAIN),
            "test": self._generate_examples(self.NUM_TRAIN, self.NUM_TEST)
        }

    def _generate_examples(self, start, n):
        for i in range(start, start + n):
            image = np.full((4, 4, 1), i % 256, np.uint8)
            yield i, {"id": i, "image": image, "label": i % 3}


def build_tiny_tfds(data_dir: str, num_shards: int) -> str:
    TinyIds(data_dir=data_dir).download_and_prepare(download_config=tfds.download.DownloadConfig(
        num_shards=num_shards))
    return data_dir


def source(kind: str, where: str, **kwargs):
    if kind == "tfrecord":
        return TFRecordSource.from_folder(where, "train", **kwargs)
    if kind == "hdf5":
        if os.path.isdir(where):
            return HDF5Source.from_folder(where, "train", ["id", "x"], **kwargs)
        raise ValueError(where)
    from tfdist.data import TFDSSource

    return TFDSSource("tiny_ids", "train", where, **kwargs)


def ids_of(src, num, pid, batch, **kwargs) -> list[list[int]]:
    """The batches of ids pipeline pid of num yields."""
    ds = build_dataset(src,
                       make_input_context(num, pid, num),
                       batch,
                       map_fn=lambda sample, _: sample["id"],
                       **kwargs)
    return [b.tolist() for b in ds.as_numpy_iterator()]


def all_pipelines(make_source, num, batch, **kwargs) -> list[list[list[int]]]:
    return [ids_of(make_source(), num, pid, batch, **kwargs) for pid in range(num)]


def flat(batches) -> list[int]:
    return [i for b in batches for i in b]
