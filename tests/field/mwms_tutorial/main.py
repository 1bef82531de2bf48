# TensorFlow's "Multi-worker training with Keras" tutorial's main.py, unchanged but for the digits
# sizes and the result file: not a line of tfdist. It runs after
#   eval "$(tfdist env --strategy=multi_worker --format=shell)"
# which writes the TF_CONFIG this script reads (and the Keras switch it needs).
import json
import os
import sys

import tensorflow as tf

import mnist_setup

per_worker_batch_size = 64
tf_config = json.loads(os.environ['TF_CONFIG'])
num_workers = len(tf_config['cluster']['worker'])

strategy = tf.distribute.MultiWorkerMirroredStrategy()

global_batch_size = per_worker_batch_size * num_workers
multi_worker_dataset = mnist_setup.mnist_dataset(global_batch_size)

with strategy.scope():
    # Model building/compiling need to be within `strategy.scope()`.
    multi_worker_model = mnist_setup.build_and_compile_cnn_model()

multi_worker_model.fit(multi_worker_dataset, epochs=6, steps_per_epoch=70, verbose=2)

x_test, y_test = mnist_setup.test_data()
_, accuracy = multi_worker_model.evaluate(x_test, y_test, verbose=0)
if tf_config['task']['index'] == 0:
    with open(os.path.join(sys.argv[1], 'result.json'), 'w') as f:
        json.dump(
            {
                'test_accuracy': accuracy,
                'workers': num_workers,
                # the version of the Keras package that defines the model: tf_keras (2.x) or keras
                'keras': sys.modules[type(multi_worker_model).__module__.split('.')[0]].__version__
            },
            f)
