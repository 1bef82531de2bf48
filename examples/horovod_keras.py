# Horovod's Keras example (examples/tensorflow2/tensorflow2_keras_mnist.py) as users write it,
# on digits instead of MNIST. The lines tfdist needs are marked "tfdist:"; everything else is
# Horovod's API used the way its example does, in its import order.
#
# Keras: tf.keras: tf-keras under `export TF_USE_LEGACY_KERAS=1`.
# Run it: `tfdist launch -n 2 -- python examples/horovod_keras.py [OUT]`, or on Slurm
# `sbatch jobs/horovod.sbatch runs/horovod_keras -- python examples/horovod_keras.py [OUT]`
# (OUT: its checkpoints, default ., and the result file tfdist's tests read, examples/results.py).
# Its Horovod lines stay: tfdist sees Horovod's optimizer and callbacks and adds none of its
# own (never wrapped twice); `tfdist.init(strategy="horovod")` sets up Horovod's environment
# (the gloo rendezvous under `srun` or `tfdist launch`), which Horovod's `hvd.init()` reads.

import os
import sys

import tfdist  # tfdist

import tensorflow as tf
import horovod.tensorflow.keras as hvd

import digits_data
import results


def train(out_dir):
    tfdist.init(strategy="horovod")  # tfdist: Horovod's environment from Slurm or `tfdist launch`
    # Horovod: initialize Horovod.
    hvd.init()

    # Horovod: pin GPU to be used to process local rank (one GPU per process)
    gpus = tf.config.experimental.list_physical_devices('GPU')
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], 'GPU')

    (images, labels), (test_images, test_labels) = digits_data.load_data()
    dataset = tf.data.Dataset.from_tensor_slices((tf.cast(images[..., tf.newaxis] / 255.0,
                                                          tf.float32), tf.cast(labels, tf.int64)))
    dataset = dataset.repeat().shuffle(2000).batch(32)

    model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(32, [3, 3], activation='relu', input_shape=(8, 8, 1)),
        tf.keras.layers.Conv2D(64, [3, 3], activation='relu'),
        tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
        tf.keras.layers.Dropout(0.25),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation='relu'),
        tf.keras.layers.Dropout(0.5),
        tf.keras.layers.Dense(10, activation='softmax')
    ])

    # Horovod: adjust learning rate based on number of GPUs.
    scaled_lr = 0.001 * hvd.size()
    opt = tf.optimizers.Adam(scaled_lr)

    # Horovod: add Horovod DistributedOptimizer.
    opt = hvd.DistributedOptimizer(opt,
                                   backward_passes_per_step=1,
                                   average_aggregated_gradients=True)

    model.compile(loss=tf.losses.SparseCategoricalCrossentropy(),
                  optimizer=opt,
                  metrics=['accuracy'],
                  experimental_run_tf_function=False)

    callbacks = [
        # Horovod: broadcast initial variable states from rank 0 to all other processes.
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        # Horovod: average metrics among workers at the end of every epoch.
        hvd.callbacks.MetricAverageCallback(),
        # Horovod: warm the learning rate up to `scaled_lr` over the first three epochs.
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs=3, verbose=1),
    ]

    # Horovod: save checkpoints only on worker 0 to prevent other workers from corrupting them.
    if hvd.rank() == 0:
        callbacks.append(
            tf.keras.callbacks.ModelCheckpoint(os.path.join(out_dir or '.',
                                                            'checkpoint-{epoch}.h5')))

    # Horovod: write logs on worker 0.
    verbose = 2 if hvd.rank() == 0 else 0

    # Horovod: adjust number of steps based on number of GPUs.
    # (tfdist's test: 8 epochs of 100 steps in all, about 9 passes over digits; 0.987-0.992
    # test accuracy measured on 2 ranks, 2026-11-26, against the test's 0.95.)
    model.fit(dataset,
              steps_per_epoch=100 // hvd.size(),
              callbacks=callbacks,
              epochs=8,
              verbose=verbose)

    _, accuracy = model.evaluate(test_images[..., None] / 255.0, test_labels, verbose=0)
    print('Test accuracy:', accuracy)
    # For tfdist's tests: every rank's result file (examples/results.py).
    results.save(out_dir, model, accuracy, size=hvd.size())
    return model


if __name__ == '__main__':
    train(sys.argv[1] if len(sys.argv) > 1 else None)
