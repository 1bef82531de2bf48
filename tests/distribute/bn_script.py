"""A model with BatchNormalization on 2 ranks, each fed its own data (its batches' statistics
differ), trained with rt.callbacks (checkpoints every 3 steps and at epoch ends). Writes
OUT/rank-N.json: the model's weights, in order, each as [name, value]. STRATEGY "mirrored": one
process with 2 replicas (2 logical CPUs), each fed its own half of every batch; it also writes
OUT/replicas.json: each statistic's copy on each replica.

    python bn_script.py OUT STRATEGY KERAS [unsynced]

KERAS: 2 (tf.keras, tf-keras: the test exports TF_USE_LEGACY_KERAS=1) or 3 (`import keras`).
"unsynced": tfdist's averaging of the layer statistics turned off (what the Keras does alone)."""
import json
import os
import sys

import numpy as np

import tfdist

import tensorflow as tf

out, strategy, version = sys.argv[1], sys.argv[2], int(sys.argv[3])
if version == 3:
    import keras
else:
    keras = tf.keras  # tf-keras: the test exports TF_USE_LEGACY_KERAS=1 (keras_environ)
    assert keras.__name__.startswith("tf_keras"), "TF_USE_LEGACY_KERAS=1 not exported: Keras 3"
if sys.argv[4:] == ["unsynced"]:
    import tfdist.distribute.layer_statistics as statistics

    statistics.average = lambda model, make_averaging: 0

keras.utils.set_random_seed(0)
mirrored = strategy == "mirrored"
rt = tfdist.init(strategy=strategy, **({"cpu_devices": 2} if mirrored else {}))
rng = np.random.default_rng(rt.rank)  # each rank its own data, around another mean
x = rng.normal(loc=2.0 * rt.rank, size=(192, 8)).astype("float32")
y = rng.integers(0, 2, size=(192, )).astype("int32")
if mirrored:  # a global batch of 32 is 16 rows for each replica: the second's around 2.0
    x[np.arange(192) // 16 % 2 == 1] += 2.0
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
# get_weights on every rank: under a strategy, reading an on-read statistic is a collective.
names = [getattr(v, "path", v.name) for v in model.weights]
weights = [[name, w.tolist()] for name, w in zip(names, model.get_weights())]
with open(os.path.join(out, f"rank-{rt.rank}.json"), "w") as f:
    json.dump(weights, f)
if mirrored:
    bn = model.layers[1]
    copies = {
        v.name: [c.numpy().tolist() for c in rt.strategy.experimental_local_results(v.value)]
        for v in (bn.moving_mean, bn.moving_variance)
    }
    with open(os.path.join(out, "replicas.json"), "w") as f:
        json.dump(copies, f)
