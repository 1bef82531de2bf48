"""The input-wait warning's words (tfdist.train.throughput.stall_message): under multi_worker a
task's wait for its batch can be a wait for a slower task (the workers agree on each batch of an
input with a last partial batch), so where one task waited little the warning names both readings
and that task instead of blaming the input pipeline. The real runs: test_input_wait.py."""

import logging

from tfdist.train.throughput import STALL_MIN_SECONDS, ThroughputMeter, stall_message

PIPELINE = ("the input pipeline is the bottleneck. Cache the parsed data, parallelize or simplify "
            "the map, prefetch, or store the data where it reads faster.")


def test_one_task_or_every_task_waiting_is_the_pipeline():
    assert stall_message(
        2, [0.5], 0.1,
        False) == ("epoch 2: steps waited for input 50% of the time (more than 10%): " + PIPELINE)
    # every task waited about as long: some task's pipeline holds them all up, agreement or not
    assert stall_message(
        3, [0.5, 0.78], 0.1,
        True) == ("epoch 3: steps waited for input 78% of the time on task 1 (more than 10%): " +
                  PIPELINE)
    # without the agreement (Horovod, one task's own pipeline) the wait is the task's own
    assert stall_message(3, [0.78, 0.02], 0.1, False).endswith(PIPELINE)


def test_a_task_that_hardly_waited_is_named_where_the_tasks_agree_on_batches():
    said = stall_message(2, [0.78, 0.03], 0.1, True)
    assert said == (
        "epoch 2: steps waited for input 78% of the time on task 0 (more than 10%); task 1 "
        "waited 3%. Under multi_worker the tasks agree on each batch of an input with a last "
        "partial batch (NumPy arrays in fit), so this is either a wait for task 1, which is "
        "slower (a busier node, a slower device, more work per step), or, with an input that "
        "needs no agreement (rt.dataset, a repeated dataset), task 0's own input pipeline: Cache "
        "the parsed data, parallelize or simplify the map, prefetch, or store the data where it "
        "reads faster.")
    assert "is the bottleneck" not in said


def test_a_task_that_waited_under_half_as_long_is_named_where_the_tasks_agree_on_batches():
    # A slow pipeline makes every task wait about as long; 20 % against 78 % is task 0 slower
    # outside its input (a loaded machine gave 58 % and 33 % to the slow_task_script's two ranks).
    said = stall_message(3, [0.2, 0.78], 0.1, True)
    assert said.startswith("epoch 3: steps waited for input 78% of the time on task 1 (more than "
                           "10%); task 0 waited 20%. Under multi_worker"), said
    assert "either a wait for task 0, which is slower" in said and "is the bottleneck" not in said
    assert stall_message(3, [0.4, 0.78], 0.1, True).endswith(PIPELINE)  # over half: alike


def _epochs_warned(caplog, waits, seconds=2.0):
    """The meter's warnings over epochs of `seconds` each that waited `waits` seconds (the
    counters set by hand, as the steps would have added to them)."""
    import tensorflow as tf

    from tfdist.train.input_wait import StepCounters

    meter = ThroughputMeter()
    meter._counters = StepCounters(tf.Variable(tf.zeros([2], tf.float64)))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tfdist"):
        for epoch, wait in enumerate(waits):
            meter.on_epoch_begin(epoch)
            meter._start -= seconds  # the epoch lasted `seconds` (and the microseconds to here)
            meter._counters.add(tf.constant(wait, tf.float64), tf.constant(0.0, tf.float64))
            meter.on_epoch_end(epoch)
    return [r.getMessage().split(":")[0] for r in caplog.records]


def test_only_a_wait_of_a_second_or_more_is_worth_a_warning(caplog):
    # 15 % of 2 s epochs is 0.3 s: scheduling on a busy node can add that much to a short epoch.
    assert _epochs_warned(caplog, [0.3, 0.3, 0.3]) == []
    assert STALL_MIN_SECONDS == 1.0
    # 60 % of 2 s: every epoch after the first (which also fills the pipeline and traces).
    assert _epochs_warned(caplog, [1.2, 1.2, 1.2]) == ["epoch 2", "epoch 3"]
