"""MultiWorkerMirroredStrategy by hand, the way the TensorFlow tutorial and course material do it:
each process builds its own TF_CONFIG from its rank, then model.fit on the global batch.

  RANK=0 WORLD_SIZE=2 BASE_PORT=23456 python bench/baselines/multi_worker_keras.py &
  RANK=1 WORLD_SIZE=2 BASE_PORT=23456 python bench/baselines/multi_worker_keras.py
"""

import json
import os

# The Keras: digits_models (tf-keras under TF_USE_LEGACY_KERAS=1, else Keras 3). Keras 3's own
# model.fit fails under MultiWorkerMirroredStrategy on TF 2.18 (keras-team/keras#20585).

rank = int(os.environ["RANK"])
world_size = int(os.environ["WORLD_SIZE"])
base_port = int(os.environ.get("BASE_PORT", "23456"))
os.environ["TF_CONFIG"] = json.dumps({
    "cluster": {
        "worker": [f"localhost:{base_port + i}" for i in range(world_size)]
    },
    "task": {
        "type": "worker",
        "index": rank
    },
})

import tensorflow as tf  # noqa: E402

from digits_models import build_model, compile_model, keras, load_data, parse_args  # noqa: E402

args = parse_args()
strategy = tf.distribute.MultiWorkerMirroredStrategy()
workers = strategy.num_replicas_in_sync
global_batch = args.batch_size * workers

keras.utils.set_random_seed(0)
(x_train, y_train), (x_test, y_test) = load_data()
train = tf.data.Dataset.from_tensor_slices((x_train, y_train)).cache()
train = train.shuffle(len(x_train), seed=0).repeat().batch(global_batch, drop_remainder=True)
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
train = train.with_options(options).prefetch(tf.data.AUTOTUNE)

with strategy.scope():
    model = compile_model(build_model(args.model),
                          keras.optimizers.SGD(args.lr * workers, momentum=0.9))
model.fit(train,
          epochs=args.epochs,
          steps_per_epoch=args.steps_per_epoch,
          verbose=2 if rank == 0 else 0)
loss, accuracy = model.evaluate(x_test, y_test, batch_size=256, verbose=0)
if rank == 0:
    print(f"test accuracy {accuracy:.4f}")
