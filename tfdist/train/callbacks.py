"""Everything tfdist adds to a model.fit, in the order it must run: `rt.callbacks(model_dir=...)`
for a user's own script and `tfdist train` alike.

Order: the engine's own (Horovod: broadcast the first weights, average the metrics before anything
reads them), the throughput meter (it adds samples/s and the input wait to the epoch's logs), the
checkpoint, TensorBoard, the epoch line, metrics.json, and last the preemption handler (it ends
fit by raising Preempted once the others are done). What an engine cannot do (batch-level
callbacks under parameter_server, a collective save) is asked of its capabilities, not its name.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Optional

import tensorflow as tf

from tfdist.cluster.slurm import requeue_wanted
from tfdist.train.checkpoint import TrainingCheckpoint, make_checkpoint
from tfdist.train.preemption import PreemptionHandler, StepPreemptionHandler, catch_signals
from tfdist.train.progress import EpochLine
from tfdist.train.summary import RunSummary, metrics_path
from tfdist.train.throughput import ThroughputMeter

log = logging.getLogger("tfdist")


class _TensorBoard(tf.keras.callbacks.TensorBoard):
    """TensorBoard at epoch frequency without per-step work: the graph of the train step is
    written at the end of the first epoch, and the per-step summaries (not recorded at this
    frequency anyway) are not even formed. Else Keras's callback timing takes its first steps for
    a slow callback and warns."""

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._graph_due, self._should_write_train_graph = self._should_write_train_graph, False

    def on_train_batch_end(self, batch, logs=None):
        if self._should_trace:  # profiling asked for
            super().on_train_batch_end(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        if self._graph_due:
            self._write_keras_model_train_graph()
            self._graph_due = False
        super().on_epoch_end(epoch, logs)


def resume_identity(engine,
                    batch_size: Optional[int],
                    extra: Optional[dict[str, Any]] = None) -> dict:
    """What a checkpoint must share with the run that resumes it: the engine, the world size, the
    global batch (when the per-replica `batch_size` is known) and `extra` (e.g. model="cnn")."""
    wanted = dict(strategy=engine.name, world_size=engine.world_size)
    if batch_size:
        wanted["global_batch_size"] = batch_size * max(1, engine.num_replicas_in_sync)
    return dict(wanted, **(extra or {}))


class TrainingCallbacks(list):
    """The callbacks for model.fit, with handles on those a script may ask afterwards:
    `meter` (epoch_rates, epoch_input_wait), `checkpoint` (resumed_from), `preemption` and
    `summary` (`summary.add(test_accuracy=...)` adds to metrics.json)."""

    meter: Optional[ThroughputMeter] = None
    checkpoint: Optional[TrainingCheckpoint] = None
    preemption: Optional[PreemptionHandler] = None
    summary: Optional[RunSummary] = None


def training_callbacks(engine,
                       model_dir: Optional[str] = None,
                       batch_size: Optional[int] = None,
                       checkpoint_steps: int = 0,
                       requeue: Optional[bool] = None,
                       meter: bool = True,
                       tensorboard: bool = True,
                       progress: bool = False,
                       identity: Optional[dict[str, Any]] = None,
                       facts: Optional[dict[str, Any]] = None) -> TrainingCallbacks:
    """The callbacks of this task's model.fit (every training task needs the same list).

    model_dir: checkpoints (every epoch, and every `checkpoint_steps` steps), resume, preemption
    (SIGTERM/SIGUSR1: agreed stop, checkpoint, exit 75; `scontrol requeue` when `requeue` is
    True, or when it is None and $TFDIST_REQUEUE=1, which the jobs/ scripts export: off
    otherwise), TensorBoard logs and metrics.json, all written by the chief.
    batch_size: per replica; only for the checkpoint's identity and metrics.json (the meter counts
    the samples). identity: more that must match to resume (e.g. model="cnn"). facts: more for
    metrics.json. progress: log one line per epoch (the chief).
    """
    if model_dir:
        catch_signals()  # as early as the script lets us
    caps, chief = engine.capabilities, engine.is_chief
    global_batch = batch_size * max(1, engine.num_replicas_in_sync) if batch_size else None
    cbs = TrainingCallbacks(engine.callbacks())
    if meter:
        cbs.meter = ThroughputMeter(global_batch, warn=chief, gather=engine.gather_floats)
        cbs.append(cbs.meter)
    if model_dir:
        if checkpoint_steps and not caps.batch_callbacks:
            log.info("checkpoint_steps=%d ignored: %s checkpoints at epoch ends only.",
                     checkpoint_steps, engine.name)
            checkpoint_steps = 0
        cbs.checkpoint = make_checkpoint(model_dir,
                                         chief,
                                         resume_identity(engine, batch_size, identity),
                                         checkpoint_steps,
                                         collective=caps.collective_checkpoint)
        cbs.append(cbs.checkpoint)
        if tensorboard and chief:
            cbs.append(_TensorBoard(os.path.join(model_dir, "logs")))
        requeue = requeue_wanted() if requeue is None else requeue
        if caps.batch_callbacks:
            several = engine.world_size > 1
            cbs.preemption = StepPreemptionHandler(engine, cbs.checkpoint, requeue, several)
        else:
            cbs.preemption = PreemptionHandler(engine, cbs.checkpoint, requeue)
    if progress and chief:
        cbs.append(EpochLine())
    run = dict(strategy=engine.name,
               environment=engine.cluster.environment,
               num_replicas=engine.num_replicas_in_sync,
               world_size=engine.world_size,
               rank=engine.rank,
               global_batch_size=global_batch,
               per_replica_batch_size=batch_size)
    path = metrics_path(model_dir) if model_dir and chief else None
    cbs.summary = RunSummary(path, dict(run, **(facts or {})), cbs.meter, cbs.checkpoint,
                             cbs.preemption)
    cbs.append(cbs.summary)
    if cbs.preemption is not None:
        cbs.append(cbs.preemption)
    return cbs
