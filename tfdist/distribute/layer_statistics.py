"""The statistics a layer keeps by itself (BatchNormalization's moving mean and variance),
averaged over every replica, so that every rank holds the same model.

No gradient updates them: each replica updates its own copy from its own batches, and the copies
drift apart. The chief's checkpoint then keeps the chief's copy, and evaluation differs by rank.
tf-keras under a tf.distribute strategy makes them on-read variables, averaged over the replicas
whenever they are read. Keras 3 makes them mirrored variables that each worker updates alone.
Under Horovod, each rank's copy is its own in both Kerases. Reading an on-read variable outside a
step is a collective, and a script that saves on the chief alone would hang. So tfdist leaves the
copies local and gives them their mean over every replica at each epoch end and before each
checkpoint, on every rank (rt.callbacks). The moving average is affine in the statistic, so
averaging at these points gives what tf-keras reads at them. Under multi_worker tf-keras's
on-read copies are averaged so too: a save reads each task's own copy, with no collective
(tfdist.distribute.own_values), which is then the mean tf-keras reads.
"""

from __future__ import annotations

import weakref
from typing import Callable

import tensorflow as tf

# id(model) -> [the model (weakly), its variables' ids, their averaging function, the step it last
# ran at]. Not an attribute of the model: tf-keras would track (and checkpoint) it.
_DONE: dict[int, list] = {}


def layer_statistics(model) -> list:
    """The floating-point non-trainable variables of `model`'s trainable layers (each layer's
    own, tf-keras's or Keras 3's). A frozen layer's weights are left alone: every rank has them."""
    found, seen = [], set()
    for layer in model._flatten_layers(include_self=True, recursive=True):
        if not layer.trainable:
            continue
        own = getattr(layer, "_non_trainable_variables", None)  # Keras 3
        if own is None:
            own = getattr(layer, "_non_trainable_weights", [])  # tf-keras
        for v in own:
            if id(v) not in seen and not v.trainable and tf.as_dtype(v.dtype).is_floating:
                seen.add(id(v))
                found.append(v)
    return found


def average(model, make_averaging: Callable[[list], Callable[[], None]]) -> int:
    """Give every replica's copy of `model`'s layer statistics their mean over all replicas. Every
    rank must call it at the same points. `make_averaging(tf_variables)` returns the function
    that averages them (a collective). It runs at most once per optimizer step, so a second call
    before the next step leaves the mean as it is. Returns how many variables it covers."""
    variables = layer_statistics(model)
    if not variables:
        return 0
    optimizer = getattr(model, "optimizer", None)
    step = int(optimizer.iterations.numpy()) if optimizer is not None else None
    ids = [id(v) for v in variables]
    done = _DONE.get(id(model))
    if done is None or done[0]() is not model or done[1] != ids:
        # Keras 3's variables wrap a tf.Variable (`_value`); tf-keras's are tf.Variables.
        done = [
            weakref.ref(model), ids,
            make_averaging([getattr(v, "_value", v) for v in variables]), None
        ]
        _DONE[id(model)] = done
    if step is None or done[3] != step:
        done[2]()
        done[3] = step
    return len(variables)


def strategy_averaging(strategy) -> Callable[[list], Callable[[], None]]:
    """Averaging over a tf.distribute strategy's replicas: one batched all-reduce."""

    def make(variables):

        @tf.function
        def averaged():
            local = strategy.run(lambda: [tf.identity(v) for v in variables])
            means = strategy.extended.batch_reduce_to(tf.distribute.ReduceOp.MEAN,
                                                      list(zip(local, variables)))
            for v, mean in zip(variables, means):
                v.assign(mean)

        return averaged

    return make


def horovod_averaging(hvd) -> Callable[[list], Callable[[], None]]:
    """Averaging over Horovod's ranks (`hvd`: horovod.tensorflow): one grouped allreduce."""

    def make(variables):

        def averaged():
            means = hvd.grouped_allreduce([tf.convert_to_tensor(v) for v in variables],
                                          op=hvd.Average,
                                          name="tfdist_layer_statistics")
            for v, mean in zip(variables, means):
                v.assign(mean)

        return averaged

    return make
