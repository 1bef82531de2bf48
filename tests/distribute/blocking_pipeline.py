"""A user's pipeline recipe (digits) whose read blocks forever on one rank once a file appears,
as a read from a hung network file system does: the test creates `trigger` when it wants the
hang, and the input pipeline numbered `block_pipeline` (the rank, under multi_worker and
horovod) then blocks in its next batch."""

from __future__ import annotations

import os
import threading

import tensorflow as tf

from pipelines import digits

info = digits.info


def dataset(split,
            input_context,
            batch_size,
            *,
            trigger: str = "",
            block_pipeline: int = 1,
            **options) -> tf.data.Dataset:
    ds = digits.dataset(split, input_context, batch_size, **options)
    if split != "train" or input_context.input_pipeline_id != block_pipeline:
        return ds

    def read(x, y):
        if os.path.exists(trigger):
            threading.Event().wait()  # the hung read: it never returns
        return x, y

    def gate(x, y):
        x2, y2 = tf.py_function(read, [x, y], [x.dtype, y.dtype])
        return tf.ensure_shape(x2, x.shape), tf.ensure_shape(y2, y.shape)

    return ds.map(gate)
