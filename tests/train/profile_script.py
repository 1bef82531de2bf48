"""A script with only tfdist's two lines whose rank 1 reads its input slowly on purpose (every
batch sleeps DELAY s there), for tests/train/test_profiling.py: $PROFILE_STEPS and $MODEL_DIR come
from the environment, as the `jobs/` scripts pass them on. After fit it checks that no profiler
is left running (starting one succeeds) and says so.

The sleep is tf.data's own sleep transformation, not a `tf.numpy_function`: with a py_func in a
multi_worker input pipeline, TensorFlow's profiler (2.18 and 2.21 measured) crashes the process in
`tf.profiler.experimental.stop()` now and then (SIGSEGV or SIGABRT in
TraceMeRecorder::Consume; docs/profiling.md, "Known problems")."""

import sys
import tempfile

import numpy as np

import tfdist

rt = tfdist.init()

import tensorflow as tf  # noqa: E402  (after init: the strategy is the default one)
from tensorflow.python.data.experimental.ops import testing  # noqa: E402  (tf.data's sleep)

DELAY = 0.1  # s a batch on rank 1; a step of this model takes a few ms
STEPS = 10


def main():
    keras = tf.keras  # the Keras the test names (TF_USE_LEGACY_KERAS)
    x = np.random.default_rng(0).random((256, 8), dtype=np.float32)
    y = (x.sum(axis=1) > 4).astype(np.int64)
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16)
    if rt.rank == 1:
        data = data.apply(testing.sleep(int(DELAY * 1e6)))  # before every batch
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
