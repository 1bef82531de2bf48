"""The input counter the progress watchdog reads (tfdist.train.input_count): each batch a pipeline
delivers adds one, on the thread that asked for it (no inter-op thread pool per batch: about 2 %
of a small model's step under mirrored, bench/ and on_calling_thread's docstring)."""

import tensorflow as tf

from tfdist.train.input_count import InputCounter


def _counted(n_batches=20):
    counter = InputCounter()
    make = counter.counted(lambda ctx: tf.data.Dataset.range(n_batches * 4).batch(4))
    return counter, make(None)


def test_each_delivered_batch_adds_one_and_the_batches_are_unchanged():
    counter, dataset = _counted()
    batches = []
    for batch in dataset:
        batches.append(batch.numpy().tolist())
        # At least the batches taken; tf.data's own prefetch (which it injects after the last
        # transformation) may have delivered a few more.
        assert counter.read() >= len(batches)
    assert batches == [list(range(4 * i, 4 * i + 4)) for i in range(20)]
    assert counter.read() == 20  # each batch once


def test_the_count_runs_on_the_calling_thread_on_this_tensorflow():
    # Where TensorFlow's MapDataset changes, on_calling_thread falls back to the public map:
    # still counted, but dearer. This says so on the stacks CI runs.
    _, dataset = _counted()
    assert getattr(dataset, "_use_inter_op_parallelism",
                   None) is False, (tf.__version__, type(dataset))
