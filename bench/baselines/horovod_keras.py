"""Horovod by hand, the way Horovod's own Keras examples do it (examples/tensorflow2/
tensorflow2_keras_mnist.py): hvd.init, shard by rank, scale the rate by hvd.size(),
DistributedOptimizer, broadcast and metric-average callbacks.

  horovodrun -np 2 -H localhost:2 --gloo python bench/baselines/horovod_keras.py
"""

import sys

import tensorflow as tf
from digits_models import TF_KERAS, build_model, compile_model, keras, load_data, parse_args

if TF_KERAS:
    # tf-keras: horovod.tensorflow.keras imports `keras`, which is Keras 3 beside TF 2.18; its
    # callbacks then fail (horovod#4290). The known workaround: let `keras` be tf_keras.
    import tf_keras
    sys.modules["keras"] = tf_keras
# Keras 3: Horovod's Keras API as it is (Keras 2 only: horovod#4290).
import horovod.tensorflow.keras as hvd  # noqa: E402

args = parse_args()
hvd.init()

keras.utils.set_random_seed(0)
(x_train, y_train), (x_test, y_test) = load_data()
train = tf.data.Dataset.from_tensor_slices((x_train, y_train)).cache()
train = train.shard(hvd.size(), hvd.rank())
train = train.shuffle(len(x_train), seed=0).repeat().batch(args.batch_size, drop_remainder=True)
train = train.prefetch(tf.data.AUTOTUNE)

model = build_model(args.model)
optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(args.lr * hvd.size(), momentum=0.9))
compile_model(model, optimizer)
callbacks = [
    hvd.callbacks.BroadcastGlobalVariablesCallback(0),
    hvd.callbacks.MetricAverageCallback(),
]
model.fit(train,
          epochs=args.epochs,
          steps_per_epoch=args.steps_per_epoch,
          callbacks=callbacks,
          verbose=2 if hvd.rank() == 0 else 0)
loss, accuracy = model.evaluate(x_test, y_test, batch_size=256, verbose=0)
if hvd.rank() == 0:
    print(f"test accuracy {accuracy:.4f}")
