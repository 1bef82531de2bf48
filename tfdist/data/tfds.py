"""A TFDS data set already prepared in a local data_dir, as a record source.

By file, TFDS reads the pipeline's files itself: `as_dataset` with a ReadConfig that carries the
input context (TFDS assigns files i, i+N, ..., the same rule as tfdist's plan). By record, every
pipeline reads all files in order and tfdist shards. Nothing is downloaded.
"""

from __future__ import annotations

import os

import tensorflow as tf

from tfdist.data.errors import DataError


class TFDSSource:
    """A split of a TFDS data set prepared beforehand in `data_dir` (`tfds build NAME
    --data_dir=DIR` on a machine with internet): nothing is downloaded on a compute node."""

    shuffles_files = False  # TFDS takes only a Python seed; the epoch's buffer shuffle remains

    def __init__(self,
                 name: str,
                 split: str,
                 data_dir: str,
                 *,
                 shuffle_buffer: int = 10_000,
                 decoders=None):
        import tensorflow_datasets as tfds

        if not data_dir or not os.path.isdir(data_dir):
            raise DataError(f"TFDS data_dir={data_dir!r} does not exist. tfdist reads TFDS data "
                            "sets prepared beforehand (nothing is downloaded on a compute node): "
                            f"run `tfds build {name} --data_dir=DIR` on a machine with internet "
                            "and pass that DIR.")
        try:
            self.builder = tfds.builder(name, data_dir=data_dir)
        except Exception as e:  # tfds raises several types for unknown or unreadable names
            raise DataError(f"TFDS data set {name!r} in {data_dir}: {e}") from None
        if not tf.io.gfile.exists(self.builder.data_dir) or not self.builder.info.splits:
            raise DataError(f"TFDS data set {name!r} is not prepared in {data_dir} (no "
                            f"{self.builder.data_dir}). Run `tfds build {name} "
                            f"--data_dir={data_dir}` first.")
        splits = self.builder.info.splits
        if split not in splits:
            raise DataError(f"TFDS data set {name!r} has no split {split!r}; it has "
                            f"{sorted(splits)}.")
        info = splits[split]
        self.name, self.split = name, split
        self.files = [os.path.basename(f.filename) for f in info.file_instructions]
        self.counts = list(info.shard_lengths)
        self.shuffle_buffer = shuffle_buffer
        self.decoders = decoders

    def records(self, file_ids, seed, cycle_length) -> tf.data.Dataset:
        import tensorflow_datasets as tfds

        num = len(self.files)
        context = None
        if list(file_ids) != list(range(num)):
            # The plan gives this pipeline files i, i+N, ...; TFDS picks the same files from an
            # InputContext(N, i). With one file, any N > num - 1 - i selects it; num is one.
            step = file_ids[1] - file_ids[0] if len(file_ids) > 1 else num
            context = tf.distribute.InputContext(num_input_pipelines=step,
                                                 input_pipeline_id=file_ids[0])
            if list(range(file_ids[0], num, step)) != list(file_ids):
                raise DataError(f"TFDS reads files i, i+N, ...; cannot read files {file_ids}.")
        config = tfds.ReadConfig(input_context=context,
                                 interleave_cycle_length=max(1, cycle_length),
                                 assert_cardinality=False)
        return self.builder.as_dataset(split=self.split,
                                       shuffle_files=False,
                                       read_config=config,
                                       decoders=self.decoders)

    def prepare(self, ds):
        return ds

    def parse(self, sample):
        return sample
