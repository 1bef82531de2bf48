"""A Keras 3 model with BatchNormalization on 2 workers under `tfdist.init(strategy=
"multi_worker")`, each worker fed its own data (its batches' statistics differ), trained with
rt.callbacks (checkpoints every 3 steps and at epoch ends). Writes OUT/rank-N.json: the weights.

    python bn_script.py OUT [unsynced]

"unsynced": tfdist's averaging of the layer statistics turned off (what Keras 3 alone does)."""
import json
import os
import sys

import numpy as np

import tfdist

import keras
import tensorflow as tf

out = sys.argv[1]
if sys.argv[2:] == ["unsynced"]:
    import tfdist.keras3.layer_statistics as statistics

    statistics.average_over_replicas = lambda model, strategy: 0

keras.utils.set_random_seed(0)
rt = tfdist.init(strategy="multi_worker")
rng = np.random.default_rng(rt.rank)  # each worker its own data, around another mean
x = rng.normal(loc=2.0 * rt.rank, size=(192, 8)).astype("float32")
y = rng.integers(0, 2, size=(192, )).astype("int32")
with rt.scope():
    model = keras.Sequential([
        keras.Input((8, )),
        keras.layers.Dense(16),
        keras.layers.BatchNormalization(),
        keras.layers.Dense(2)
    ])
    model.compile(optimizer=rt.optimizer(keras.optimizers.SGD(0.01)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).with_options(options)
model.fit(dataset,
          epochs=2,
          verbose=0,
          callbacks=rt.callbacks(model_dir=os.path.join(out, "run"), checkpoint_steps=3))
weights = {v.path: v.numpy().tolist() for v in model.weights}
with open(os.path.join(out, f"rank-{rt.rank}.json"), "w") as f:
    json.dump(weights, f)
