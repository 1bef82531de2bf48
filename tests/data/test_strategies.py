"""The same pipeline function under a strategy's distribute_datasets_from_function."""

import tfdist  # noqa: F401
import tensorflow as tf

from pipelines import load_pipeline


def test_mirrored_distribute_datasets_from_function(tmp_path):
    digits = load_pipeline("digits")
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    contexts = []

    def dataset_fn(input_context):
        contexts.append(input_context)
        return digits.dataset("train",
                              input_context,
                              input_context.get_per_replica_batch_size(64),
                              data_dir=str(tmp_path))

    dist = strategy.distribute_datasets_from_function(dataset_fn)
    x, y = next(iter(dist))
    assert x.shape == (64, 8, 8, 1) and y.shape == (64, )
    assert contexts[0].num_input_pipelines == 1
