# TensorFlow's "Multi-worker training with Keras" tutorial's main.py on Keras 3 (its
# mnist_setup.py builds the model with `import keras`), on digits, plus one line: `import tfdist`
# (Keras 3's fit fails under MultiWorkerMirroredStrategy without it, keras-team/keras#20585). Not
# tfdist.init(): the tutorial makes its own MultiWorkerMirroredStrategy from TF_CONFIG, which
#   tfdist launch -n 2 -- bash -c 'eval "$(tfdist env --strategy=multi_worker --format=shell)"
#       exec python examples/tf_multi_worker_tutorial_keras3/main.py'
# writes (on Slurm: `sbatch jobs/multi_worker.sbatch runs/tutorial -- bash -c '...'`). Optional
# argument: a directory for the result file tfdist's tests read (examples/results.py).
import json
import os
import sys

import tfdist  # noqa: F401  # tfdist: corrects Keras 3 under MultiWorkerMirroredStrategy

import tensorflow as tf

import mnist_setup
import results  # beside digits_data, on mnist_setup's path

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
print('Test accuracy:', accuracy)
# For tfdist's tests: every worker's result file (examples/results.py).
results.save(sys.argv[1] if len(sys.argv) > 1 else None,
             multi_worker_model,
             accuracy,
             workers=num_workers)
