"""A script with only tfdist's two lines whose rank 1 reads its input slowly on purpose (every
batch sleeps DELAY s there), for tests/train/test_profiling.py: $PROFILE_STEPS and $MODEL_DIR come
from the environment, as the `jobs/` scripts pass them on. After fit it checks that no profiler
is left running (starting one succeeds) and says so."""

import sys
import tempfile
import time

import numpy as np

import tfdist

rt = tfdist.init()

import tensorflow as tf  # noqa: E402  (after init: the strategy is the default one)

DELAY = 0.1  # s a batch on rank 1; a step of this model takes a few ms
STEPS = 10


def main():
    keras = tf.keras  # the Keras the test names (TF_USE_LEGACY_KERAS)
    delay = DELAY if rt.rank == 1 else 0.0

    def slow(x, y):
        time.sleep(delay)
        return x, y

    x = np.random.default_rng(0).random((256, 8), dtype=np.float32)
    y = (x.sum(axis=1) > 4).astype(np.int64)
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16)
    data = data.map(lambda a, b: tf.numpy_function(slow, [a, b], [tf.float32, tf.int64]))
    data = data.map(lambda a, b: (tf.ensure_shape(a, [None, 8]), tf.ensure_shape(b, [None])))
    model = keras.Sequential([keras.Input((8, )), keras.layers.Dense(16), keras.layers.Dense(2)])
    model.compile(optimizer="sgd",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(data, epochs=1, steps_per_epoch=STEPS, verbose=0)
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)  # fails while another profiler runs
        tf.profiler.experimental.stop(save=False)
    print(f"script: rank {rt.rank}: no profiler left running after fit", flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
