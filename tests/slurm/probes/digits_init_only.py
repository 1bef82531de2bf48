"""A single-device Keras script (a small model on scikit-learn's digits, NumPy arrays) with
`import tfdist` and `rt = tfdist.init()` and no strategy or run directory of its own: both come
from its launcher (`jobs/horovod.sbatch`, `tfdist launch --strategy`), the directory from
$MODEL_DIR. The model is built, compiled and fitted as on one device: tfdist's strategy is the
program's default, Horovod's optimizer and callbacks come with compile and fit, and its
checkpoints go to $MODEL_DIR (issue 41). `rt` is asked only for what the probe prints.

Prints one `digits_init_only: {...}` line per rank (its strategy, run directory, the sum of its
weights); every rank saves MODEL_DIR/model.keras, as one process would: the chief's is the
file (tfdist.train.user_callbacks).
"""

import json
import os

import tfdist
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

rt = tfdist.init()

x, y = load_digits(return_X_y=True)
x = (x / 16.0).astype("float32")
tf.keras.utils.set_random_seed(0)
model = tf.keras.Sequential([
    tf.keras.layers.Input((64, )),
    tf.keras.layers.Dense(64, activation="relu"),
    tf.keras.layers.Dense(10),
])
model.compile(optimizer=tf.keras.optimizers.SGD(0.05),
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
model.fit(x, y, batch_size=64, epochs=3, verbose=2)
model.save(os.path.join(os.environ["MODEL_DIR"], "model.keras"))  # the chief's lands there
weights = float(sum(np.sum(w) for w in model.get_weights()))
result = dict(rank=rt.rank,
              world_size=rt.world_size,
              strategy=rt.strategy_name,
              model_dir=rt.model_dir,
              weight_sum=weights,
              accuracy=float(model.evaluate(x, y, verbose=0)[1]))
print(f"digits_init_only: {json.dumps(result)}", flush=True)
rt.shutdown()
