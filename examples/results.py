"""What an example reports at its end: its test accuracy, printed, and with an output directory
(the example's first argument) a file of this process's own, which tfdist's tests read.

Not part of what an example shows: the public scripts print `model.evaluate`'s result; this
writes it where a test finds it. Every process that trained writes `result-<host>-<pid>.json`
(no rank needed: the examples know none without tfdist's lines), with a digest of each of the
model's variables, so a test sees every variable equal on every rank.
"""

import hashlib
import json
import os
import socket
import sys


def save(out_dir, model, accuracy, **facts):
    """With `out_dir`, write this process's result file there. `facts`:
    more entries for the file (the number of workers, say)."""
    if not out_dir:
        return
    values = [v.numpy() for v in model.weights]
    facts.update(
        test_accuracy=float(accuracy),
        replicas=model.distribute_strategy.num_replicas_in_sync,
        # the strategy's class: MultiWorkerMirroredStrategy, MirroredStrategy, ...
        strategy=type(model.distribute_strategy).__name__,
        # the version of the Keras that defines the model: tf_keras (2.x) or keras (3.x)
        keras=sys.modules[_keras_package(model)].__version__,
        variables=[hashlib.sha256(value.tobytes()).hexdigest() for value in values],
        weight_sums=[float(value.sum()) for value in values])
    name = f"result-{socket.gethostname()}-{os.getpid()}.json"
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(facts, f)


def _keras_package(model) -> str:
    """`keras` or `tf_keras`: the package of the Keras class the model is (or subclasses)."""
    return next(
        c.__module__.split(".")[0] for c in type(model).__mro__
        if c.__module__.split(".")[0] in ("keras", "tf_keras"))
