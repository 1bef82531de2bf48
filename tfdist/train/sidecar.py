"""The parameter-server evaluator: evaluate each new checkpoint while the cluster trains.

TensorFlow's design for ParameterServerStrategy (its "sidecar evaluator"): one extra task, not
part of the training, reads the checkpoints the chief writes and evaluates them, so training never
pauses for evaluation. This one reads tfdist's checkpoints (tfdist.train.checkpoint), evaluates
the newest one it has not seen, logs one line per checkpoint and writes TensorBoard scalars to
MODEL_DIR/logs/eval; after the chief has finished it evaluates the last checkpoint once more if
it missed it, and returns every evaluation.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable

import tensorflow as tf

from tfdist.train.checkpoint import latest

log = logging.getLogger("tfdist")

EVAL_LOGS = os.path.join("logs", "eval")


def evaluate_checkpoints(model_dir: str,
                         build_model: Callable[[], Any],
                         dataset: Callable[[], Any],
                         finished: Callable[[], bool],
                         poll_seconds: float = 2.0) -> list[dict[str, Any]]:
    """Evaluate checkpoints under model_dir until `finished()` (the chief is gone) and the last
    one is done. build_model: a compiled Keras model (with metrics); dataset: the test data."""
    writer = tf.summary.create_file_writer(os.path.join(model_dir, EVAL_LOGS))
    results: list[dict[str, Any]] = []
    seen = None
    while True:
        done = finished()  # before the scan: a checkpoint written just before the end is found
        try:
            found = latest(model_dir)
        except OSError:  # pruned between listing and reading its meta.json
            found = None
            done = False
        if found is not None and found[0] != seen:
            seen = found[0]
            result = _evaluate(found[0], found[1], build_model, dataset)
            if result is not None:
                results.append(result)
                with writer.as_default(step=result["global_step"]):
                    for name, value in result["metrics"].items():
                        tf.summary.scalar(name, value)
                writer.flush()
            continue  # a newer checkpoint may have come meanwhile
        if done:
            return results
        time.sleep(poll_seconds)


def _evaluate(path: str, meta: dict[str, Any], build_model, dataset) -> dict[str, Any] | None:
    model = build_model()
    try:
        tf.train.Checkpoint(model=model).read(os.path.join(path, "state")).expect_partial()
    except (tf.errors.NotFoundError, tf.errors.DataLossError) as e:
        # The chief keeps the newest few checkpoints and removed this one while it was read.
        log.info("tfdist evaluator: %s went away while it was read (%s); next one.", path,
                 type(e).__name__)
        return None
    values = model.evaluate(dataset(), verbose=0, return_dict=True)
    metrics = {name: float(value) for name, value in values.items()}
    result = {
        "checkpoint": path,
        "global_step": int(meta.get("global_step", 0)),
        "epoch": meta.get("epoch"),
        "step": meta.get("step"),
        "metrics": metrics,
    }
    log.info("tfdist evaluator: %s (epoch %s, step %s): %s", os.path.basename(path),
             result["epoch"], result["step"],
             ", ".join(f"{name} {value:.4f}" for name, value in metrics.items()))
    return result
