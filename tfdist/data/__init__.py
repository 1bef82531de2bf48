"""tfdist.data: tf.data building blocks driven by a tf.distribute.InputContext.

Sources (TFRecord, HDF5, TFDS, NumPy, synthetic) give records and their counts; `build_dataset`
plans the sharding, shuffles with a seed per epoch, caches, maps, batches and prefetches, as its
`BuildOptions` say;
`write_shards` packs samples into TFRecord or HDF5 shards with a manifest.
"""

from tfdist.data.build import BuildOptions, build_dataset, dataset_options
from tfdist.data.context import epoch_seed, make_input_context
from tfdist.data.errors import DataError
from tfdist.data.hdf5 import HDF5Source
from tfdist.data.indexed import ArraySource, SyntheticSource
from tfdist.data.manifest import read_manifest
from tfdist.data.sharding import ShardPlan, plan_shards
from tfdist.data.tfds import TFDSSource
from tfdist.data.tfrecord import TFRecordSource, skipped_records
from tfdist.data.writers import fingerprint, write_shards

__all__ = [
    "ArraySource", "BuildOptions", "DataError", "HDF5Source", "ShardPlan", "SyntheticSource",
    "TFDSSource", "TFRecordSource", "build_dataset", "dataset_options", "epoch_seed", "fingerprint",
    "make_input_context", "plan_shards", "read_manifest", "skipped_records", "write_shards"
]
