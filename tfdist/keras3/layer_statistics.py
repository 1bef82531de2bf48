"""Keras 3 under MultiWorkerMirroredStrategy: the statistics a layer keeps by itself (e.g.
BatchNormalization's moving mean and variance) averaged over the workers, as tf-keras has them.

Keras 3 creates them as mirrored variables that no gradient updates (`add_weight(trainable=False)`,
aggregation "none"): each worker updates its own copy from its own batches, and the copies drift
apart. The chief's checkpoint keeps the chief's, and evaluation differs from rank to rank.
tf-keras makes them on-read variables averaged over the replicas whenever they are read.
Reading such a variable outside a step is a collective, and a script that saves on the chief
alone would hang. So the copies stay mirrored, and tfdist replaces them with their mean over
every replica at each epoch end and before each checkpoint. Every rank makes the same calls (the
callbacks and checkpoints of rt.callbacks). The moving average is affine in the statistic, so
averaging at these points gives what tf-keras reads at them.
"""

from __future__ import annotations

import tensorflow as tf

_SYNC = "_tfdist_layer_statistics_sync"  # the model's compiled averaging function


def layer_statistics(model) -> list:
    """The floating-point non-trainable variables of `model`'s trainable layers (own variables, not
    their sublayers'). A frozen layer's weights are left alone: they are the same on every rank."""
    found, seen = [], set()
    for layer in model._flatten_layers(include_self=True, recursive=True):
        if not layer.trainable:
            continue
        for v in getattr(layer, "_non_trainable_variables", []):
            if id(v) not in seen and not v.trainable and v.dtype.startswith("float"):
                seen.add(id(v))
                found.append(v)
    return found


def average_over_replicas(model, strategy) -> int:
    """Give every replica's copy of `model`'s layer statistics their mean over all replicas (one
    collective for all of them). Every rank must call it at the same point. Returns how many
    variables were averaged. It runs at most once per optimizer step: called again before the
    next step, it leaves the mean as it is."""
    variables = layer_statistics(model)
    if not variables:
        return 0
    step = int(model.optimizer.iterations.numpy()) if getattr(model, "optimizer", None) else -1
    done = getattr(model, _SYNC, None)
    if done is None or done[0] != [id(v) for v in variables]:
        done = [[id(v) for v in variables], _averaging(variables, strategy), None]
        setattr(model, _SYNC, done)
    if done[2] == step and step >= 0:
        return len(variables)
    done[1]()
    done[2] = step
    return len(variables)


def _averaging(variables, strategy):
    tf_variables = [getattr(v, "_value", v) for v in variables]  # the tf.Variable under Keras's

    @tf.function
    def average():
        local = strategy.run(lambda: [tf.identity(v) for v in tf_variables])
        means = strategy.extended.batch_reduce_to(tf.distribute.ReduceOp.MEAN,
                                                  list(zip(local, tf_variables)))
        for v, mean in zip(tf_variables, means):
            v.assign(mean)

    return average
