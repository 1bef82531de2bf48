"""Train with a slow or a fast input and record the meter's input-wait share of each epoch.

argv: STRATEGY INPUT OUT [CPU_DEVICES [STEPS_PER_EXECUTION]]. INPUT "fast": batches come from
memory and a large step computes (input waits are tiny). INPUT "slow": the step is small and
every batch sleeps in the pipeline SLOWDOWN times as long as this run's own step took with a fast
input (measured first, on this machine at this moment), so the steps mostly wait however fast or
loaded the machine is.
"""

import json
import sys
import time

import numpy as np

import tfdist
import tensorflow as tf
from tfdist.keras_compat import is_keras3, keras_module
from tfdist.train.preemption import StepPreemptionHandler

STEPS_PER_EPOCH, EPOCHS, BATCH = 12, 3, 64
SLOWDOWN = 10  # input time per batch / step time: an input-wait share of about 10/11
# seconds: at least a few timer ticks and scheduler slices, and waits of over a second an epoch
# (12 steps less the 2 batches ready ahead: 1.5 s), which the warning needs (STALL_MIN_SECONDS).
MIN_DELAY = 0.15
AGREE_EVERY = 8  # slow input: tasks agree on preemption about every 8 steps (in seconds: 8 delays)
# At most this many steps between agreements: a third agreement comes within the 36 steps however
# fast the first steps after the second went (batches ready ahead can make them take no time).
MAX_INTERVAL = 24


def main(strategy, speed, out, cpu_devices="0", steps_per_execution="1"):
    slow = {"fast": False, "slow": True}[speed]
    options = {"cpu_devices": int(cpu_devices)} if int(cpu_devices) else {}
    rt = tfdist.init(strategy=strategy, **options)
    x = np.random.RandomState(0).rand(1024, 64).astype("float32")
    y = (x.sum(axis=1) > 32).astype("int64")
    delay = 0.0

    def sleep(features, labels):
        # A Python call per batch that sleeps: an input pipeline slower than the step.
        done = tf.py_function(lambda: time.sleep(delay) or 0, [], tf.int32)
        with tf.control_dependencies([done]):
            return tf.identity(features), tf.identity(labels)

    def input_fn(ctx):
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shard(ctx.num_input_pipelines,
                                                              ctx.input_pipeline_id)
        ds = ds.cache().repeat().batch(BATCH)
        # A slow pipeline may run one batch ahead, no more: batches it buffered while the first
        # epoch traced would hide its speed in the next epochs.
        return ds.map(sleep).prefetch(1) if slow else ds.prefetch(tf.data.AUTOTUNE)

    width = 64 if slow else 2048
    with rt.scope():
        model = tf.keras.Sequential([
            tf.keras.layers.Input((64, )),
            tf.keras.layers.Dense(width, activation="relu"),
            tf.keras.layers.Dense(width, activation="relu"),
            tf.keras.layers.Dense(2)
        ])
        model.compile(rt.optimizer(tf.keras.optimizers.SGD(0.01)),
                      tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      steps_per_execution=int(steps_per_execution))
    if slow:
        # The step time with delay 0 (the pipeline reads `delay` at every batch): one fit to
        # trace, one timed; fit's own start and end count as step time, erring on the slow side.
        data = rt.dataset(input_fn)
        model.fit(data, epochs=1, steps_per_epoch=2, verbose=0)
        start = time.perf_counter()
        model.fit(data, epochs=1, steps_per_epoch=STEPS_PER_EPOCH, verbose=0)
        step = (time.perf_counter() - start) / STEPS_PER_EPOCH
        delay = max(MIN_DELAY, SLOWDOWN * step)
        if rt.world_size > 1 and strategy != "parameter_server":
            # One delay for all tasks, the slowest's: each measured its own step, and a task that
            # sleeps longer than the chief would set the pace of the chief's steps (and so the
            # interval of the preemption agreement) instead of the delay the chief knows.
            delay = max(row[0] for row in rt.engine.gather_floats([delay]))
    callbacks = rt.callbacks(batch_size=BATCH)  # the engine's and the meter
    # Tasks agree on preemption every AGREE_EVERY steps or so: the chief sets the interval from
    # its step time (mostly the delay) and check_seconds.
    stop = StepPreemptionHandler(rt.engine,
                                 several_tasks=rt.world_size > 1,
                                 check_steps=2,
                                 check_seconds=AGREE_EVERY * max(delay, MIN_DELAY),
                                 max_steps=MAX_INTERVAL)
    history = model.fit(rt.dataset(input_fn),
                        epochs=EPOCHS,
                        steps_per_epoch=STEPS_PER_EPOCH,
                        verbose=0,
                        callbacks=callbacks + ([] if strategy == "parameter_server" else [stop]))
    meter = callbacks.meter
    with open(f"{out}.{rt.rank}", "w") as f:
        json.dump(
            {
                "input_wait": meter.epoch_input_wait,
                "per_task": meter.epoch_input_wait_per_task,
                "history": history.history.get("input_wait"),
                "samples_per_sec": meter.epoch_rates,
                "seconds": meter.epoch_seconds,
                "samples": meter.epoch_samples,
                "expected_samples": STEPS_PER_EPOCH * rt.global_batch_size(BATCH),
                "replicas": rt.num_replicas,
                "agreements": stop.agreements,
                "delay": delay,
                "keras": keras_module(3 if is_keras3(model) else 2).__version__,
                "optimizer_steps": int(model.optimizer.iterations.numpy()),
            }, f)
    rt.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
