"""The input-wait warning's words (tfdist.train.throughput.stall_message): under multi_worker a
task's wait for its batch can be a wait for a slower task (the workers agree on each batch of an
input with a last partial batch), so where one task waited little the warning names both readings
and that task instead of blaming the input pipeline. The real runs: test_input_wait.py."""

from tfdist.train.throughput import stall_message

PIPELINE = ("the input pipeline is the bottleneck. Cache the parsed data, parallelize or simplify "
            "the map, prefetch, or store the data where it reads faster.")


def test_one_task_or_every_task_waiting_is_the_pipeline():
    assert stall_message(
        2, [0.5], 0.1,
        False) == ("epoch 2: steps waited for input 50% of the time (more than 10%): " + PIPELINE)
    # every task waited: some task's pipeline holds them all up, agreement or not
    assert stall_message(
        3, [0.2, 0.78], 0.1,
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
