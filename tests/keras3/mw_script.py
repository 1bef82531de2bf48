"""A Keras 3 model (`import keras`) under the script's own MultiWorkerMirroredStrategy (TF_CONFIG
from `tfdist env`), as TensorFlow's tutorial builds it: fit, evaluate, predict; each rank writes
what it saw to OUT_DIR/rank-N.json.

argv: ORDER OUT_DIR [WITHOUT]. ORDER: tfdist_first or keras_first (the order of the imports).
WITHOUT: the name of a tfdist.keras_compat.multi_worker correction to undo after the imports (the
test that shows it is needed)."""

import json
import os
import sys

order, out_dir = sys.argv[1], sys.argv[2]
without = sys.argv[3] if len(sys.argv) > 3 else ""
if order == "tfdist_first":
    import tfdist  # noqa: F401
    import keras
else:
    import keras
    import tfdist  # noqa: F401

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

trainer = sys.modules["keras.src.backend.tensorflow.trainer"]
if without == "symbolic_build_from_local_spec":
    cls = trainer.TensorFlowTrainer
    cls._maybe_symbolic_build = cls._maybe_symbolic_build.__wrapped__
elif without == "reduce_metrics_leaf_by_leaf":
    trainer.reduce_per_replica = trainer.reduce_per_replica.__wrapped__

strategy = tf.distribute.MultiWorkerMirroredStrategy()
rank = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
rng = np.random.default_rng(0)
x = rng.normal(size=(256, 8)).astype("float32")
y = (x.sum(1) > 0).astype("int64")
keras.utils.set_random_seed(1)
with strategy.scope():
    model = keras.Sequential(
        [keras.Input((8, )),
         keras.layers.Dense(16, activation="relu"),
         keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
history = model.fit(tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16),
                    epochs=2,
                    steps_per_epoch=5,
                    verbose=0)
loss, accuracy = model.evaluate(tf.data.Dataset.from_tensor_slices((x, y)).batch(32), verbose=0)
predictions = model.predict(x[:40], batch_size=16, verbose=0)
with open(os.path.join(out_dir, f"rank-{rank}.json"), "w") as f:
    json.dump(
        dict(loss=history.history["loss"],
             eval=[loss, accuracy],
             predictions=predictions.tolist(),
             weights=[w.tolist() for w in model.get_weights()]), f)
