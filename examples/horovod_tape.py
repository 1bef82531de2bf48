# Horovod's GradientTape example (examples/tensorflow2/tensorflow2_mnist.py) as users write it, on
# digits instead of MNIST. The lines tfdist needs are marked "tfdist:".
#
# Keras: tf.keras or Keras 3 as TensorFlow's switch says.
# Run it: `tfdist launch -n 2 -- python examples/horovod_tape.py [OUT]`, or on Slurm
# `sbatch jobs/horovod.sbatch runs/horovod_tape -- python examples/horovod_tape.py [OUT]`
# (OUT: its checkpoints, default ., and the result file tfdist's tests read, examples/results.py).
# Its Horovod lines stay: tfdist sees Horovod's optimizer and callbacks and adds none of its
# own (never wrapped twice); `tfdist.init(strategy="horovod")` sets up Horovod's environment
# (the gloo rendezvous under `srun` or `tfdist launch`), which Horovod's `hvd.init()` reads.

import os
import sys

import tfdist  # tfdist

import tensorflow as tf
import horovod.tensorflow as hvd

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
    loss = tf.losses.SparseCategoricalCrossentropy()

    # Horovod: adjust learning rate based on number of GPUs.
    opt = tf.optimizers.Adam(0.001 * hvd.size())

    checkpoint_dir = os.path.join(out_dir or '.', 'checkpoints')
    checkpoint = tf.train.Checkpoint(model=model, optimizer=opt)

    @tf.function
    def training_step(images, labels, first_batch):
        with tf.GradientTape() as tape:
            probs = model(images, training=True)
            loss_value = loss(labels, probs)

        # Horovod: add Horovod Distributed GradientTape.
        tape = hvd.DistributedGradientTape(tape)

        grads = tape.gradient(loss_value, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))

        # Horovod: broadcast initial variable states from rank 0 to all other processes,
        # after the first gradient step so that the optimizer's variables exist.
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables, root_rank=0)

        return loss_value

    # Horovod: adjust number of steps based on number of GPUs.
    # (tfdist's test: 400 steps in all, about 9 passes over digits; 0.987 test accuracy
    # measured on 2 ranks, 2026-11-26, against the test's 0.95.)
    for batch, (images, labels) in enumerate(dataset.take(400 // hvd.size())):
        loss_value = training_step(images, labels, batch == 0)

        if batch % 200 == 0 and hvd.local_rank() == 0:
            print('Step #%d\tLoss: %.6f' % (batch, loss_value))

    probs = model(test_images[..., None] / 255.0, training=False)
    accuracy = float(tf.reduce_mean(tf.cast(tf.argmax(probs, 1) == test_labels, tf.float32)))
    print('Test accuracy:', accuracy)
    # Horovod: save checkpoints only on worker 0 to prevent other workers from corrupting it.
    if hvd.rank() == 0:
        checkpoint.save(checkpoint_dir)
    # For tfdist's tests: every rank's result file (examples/results.py).
    results.save(out_dir, model, accuracy, size=hvd.size())
    return model


if __name__ == '__main__':
    train(sys.argv[1] if len(sys.argv) > 1 else None)
