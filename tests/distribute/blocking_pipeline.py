"""A user's pipeline recipe (digits) whose read blocks forever on one rank, as a read from a hung
network file system does. The input pipeline numbered `block_pipeline` (the rank, under
multi_worker and horovod) blocks in its next batch once the file `trigger` exists (the test
creates it when it wants the hang), or with `block_after` after that many batches, only in the
first run of a Slurm job when `first_run_only` (SLURM_RESTART_COUNT unset or 0); `delay`: seconds
each of its batches takes before that (a slow read)."""

from __future__ import annotations

import os
import threading
import time

import tensorflow as tf

from pipelines import digits

info = digits.info


def dataset(split,
            input_context,
            batch_size,
            *,
            trigger: str = "",
            block_pipeline: int = 1,
            block_after: int = 0,
            first_run_only: bool = False,
            delay: float = 0.0,
            **options) -> tf.data.Dataset:
    ds = digits.dataset(split, input_context, batch_size, **options)
    if split != "train" or input_context.input_pipeline_id != block_pipeline:
        return ds
    if first_run_only and os.environ.get("SLURM_RESTART_COUNT", "0") not in ("", "0"):
        return ds
    delivered = [0]

    def read(x, y):
        if (trigger and os.path.exists(trigger)) or (block_after and delivered[0] >= block_after):
            threading.Event().wait()  # the hung read: it never returns
        time.sleep(delay)
        delivered[0] += 1
        return x, y

    def gate(x, y):
        x2, y2 = tf.py_function(read, [x, y], [x.dtype, y.dtype])
        return tf.ensure_shape(x2, x.shape), tf.ensure_shape(y2, y.shape)

    return ds.map(gate)
