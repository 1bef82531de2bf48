"""Train a small model a few steps on a fixed global batch; save the final weights.

Run by test_same_math.py as 1 process or under `tfdist launch`; argv: STRATEGY OUT.npz [KERAS]
(KERAS: 2, tf-keras, the default, with TF_USE_LEGACY_KERAS=1 exported by the test; or 3, `import
keras`).
"""

import sys

import numpy as np

import tfdist
import tensorflow as tf

GLOBAL_BATCH, STEPS = 32, 6


def input_fn(ctx):
    rng = np.random.RandomState(0)
    x = rng.rand(GLOBAL_BATCH * STEPS, 8).astype("float32")
    y = (x.sum(axis=1) > 4).astype("int64")
    # No shuffle; pipeline i takes records i, i+N, ...: the union of one step's per-replica
    # batches is the single worker's global batch.
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shard(ctx.num_input_pipelines,
                                                          ctx.input_pipeline_id)
    return ds.batch(ctx.get_per_replica_batch_size(GLOBAL_BATCH), drop_remainder=True).repeat()


def main(strategy, out, keras_version="2"):
    from tfdist.keras_compat import keras_module

    keras = keras_module(int(keras_version))
    options = {"cpu_devices": 2} if strategy == "mirrored" else {}
    rt = tfdist.init(strategy=strategy, lr_scaling="none", **options)
    keras.utils.set_random_seed(1)
    with rt.scope():
        model = keras.Sequential([
            keras.layers.Input((8, )),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(2)
        ])
        initial = [w.copy() for w in model.get_weights()]
        model.compile(optimizer=rt.optimizer(keras.optimizers.SGD(0.5)),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(rt.dataset(input_fn),
              epochs=1,
              steps_per_epoch=STEPS,
              callbacks=rt.callbacks(),
              verbose=0)
    # Every rank's weights: all must hold the chief's.
    np.savez(out if rt.is_chief else f"{out}.rank{rt.rank}.npz",
             *model.get_weights(),
             *initial,
             replicas=rt.num_replicas)
    rt.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
