"""MirroredStrategy by hand, the way TensorFlow's distributed-training guide does it: one process,
the model built and compiled in the strategy's scope, model.fit on the global batch. Without GPUs
the CPU is split into --cpu_devices logical devices (as `tfdist train --cpu_devices` does).

  python bench/baselines/mirrored_keras.py --cpu_devices=2
"""

import sys

import tensorflow as tf

from digits_models import build_model, compile_model, keras, load_data, make_optimizer, parse_args

devices = int(next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--cpu_devices=")), 1))
sys.argv = [a for a in sys.argv if not a.startswith("--cpu_devices=")]
args = parse_args()
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * devices)
strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(devices)])
replicas = strategy.num_replicas_in_sync

keras.utils.set_random_seed(0)
(x_train, y_train), (x_test, y_test) = load_data()
train = tf.data.Dataset.from_tensor_slices((x_train, y_train)).cache()
train = train.shuffle(len(x_train), seed=0).repeat().batch(args.batch_size * replicas,
                                                           drop_remainder=True)
train = train.prefetch(tf.data.AUTOTUNE)

with strategy.scope():
    model = compile_model(build_model(args.model), make_optimizer(args.optimizer,
                                                                  args.lr * replicas))
model.fit(train, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch, verbose=2)
loss, accuracy = model.evaluate(x_test, y_test, batch_size=256, verbose=0)
print(f"test accuracy {accuracy:.4f}")
