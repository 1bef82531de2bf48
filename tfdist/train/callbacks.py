"""Everything tfdist adds to a model.fit, in the order it must run: `rt.callbacks(model_dir=...)`
for a user's own script and `tfdist train` alike.

Order: the progress watchdog (first: the others' epoch-end work gets its grace), the step
profiler when asked (its step marks wrap the step as Keras runs it), the engine's
own (Horovod: broadcast the first weights, average the metrics before anything reads them), the
throughput meter (it adds samples/s and the input wait to the epoch's logs), the
checkpoint, TensorBoard, the epoch line, metrics.json, and last the preemption handler (it ends
fit by raising Preempted once the others are done). What an engine cannot do (batch-level
callbacks under parameter_server, a collective save, layer statistics per replica) is asked of
its capabilities, not its name.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Callable, Optional

from tfdist.cluster.slurm import requeue_wanted
from tfdist.keras_compat import adapter
from tfdist.keras_compat.callback import Callback
from tfdist.options import check_options
from tfdist.train.checkpoint import TrainingCheckpoint, make_checkpoint
from tfdist.train.preemption import PreemptionHandler, StepPreemptionHandler, catch_signals
from tfdist.train.profile_options import ranks_setting, steps_setting
from tfdist.train.progress import EpochLine
from tfdist.train.progress_board import ProgressBoard, progress_dir
from tfdist.train.restarts import end_after_failure
from tfdist.train.summary import RunSummary, metrics_path
from tfdist.train.throughput import ThroughputMeter
from tfdist.train.watchdog import Watchdog, timeout_setting
from tfdist.train.watchdog_callback import WatchdogCallback

log = logging.getLogger("tfdist")


class _TensorBoard(Callback):
    """TensorBoard logs in `log_dir` by the TensorBoard callback of the model's own Keras (it reads
    that Keras's model internals), chosen when fit hands over the model."""

    def __init__(self, log_dir: str):
        super().__init__()
        # tf-keras: its batch hook reads no logs (no host sync a step), so parameter_server takes
        # it. On the instance: Callback.__init__ sets False there.
        self._supports_tf_logs = True
        self.log_dir = log_dir
        self.board = None

    def set_model(self, model):
        super().set_model(model)
        if self.board is None:
            self.board = adapter(model).tensorboard(self.log_dir)
            if getattr(self, "params", None):
                self.board.set_params(self.params)
        self.board.set_model(model)

    def set_params(self, params):
        super().set_params(params)
        if self.board is not None:
            self.board.set_params(params)


for _hook in ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end",
              "on_train_batch_end", "on_test_begin", "on_test_end"):
    setattr(_TensorBoard,
            _hook,
            lambda self, *args, _hook=_hook, **kwargs: getattr(self.board, _hook)(*args, **kwargs))


def resume_identity(engine,
                    batch_size: Optional[int],
                    extra: Optional[dict[str, Any]] = None) -> dict:
    """What a checkpoint must share with the run that resumes it: the engine, the world size, the
    global batch (when the per-replica `batch_size` is known) and `extra` (e.g. model="cnn")."""
    wanted = dict(strategy=engine.name, world_size=engine.world_size)
    if batch_size:
        wanted["global_batch_size"] = batch_size * max(1, engine.num_replicas_in_sync)
    return dict(wanted, **(extra or {}))


class _LayerStatistics(Callback):
    """The model's layer statistics (BatchNormalization's moving mean and variance) averaged over
    the replicas at each epoch end (and, through the checkpoint, before each write) where each
    replica keeps its own: tfdist.distribute.layer_statistics."""

    # Added to a script's fit (tfdist.train.auto_callbacks), it runs before the script's own
    # callbacks: they see, and keep, the averaged statistics (Keras 3's
    # EarlyStopping(restore_best_weights=True) sets the weights it kept at an epoch end).
    before_the_scripts = True

    def __init__(self, engine):
        super().__init__()
        self.engine = engine

    def average(self, model) -> None:
        if model is not None:
            self.engine.average_layer_statistics(model)

    def on_epoch_end(self, epoch, logs=None):
        self.average(self.model)


class TrainingCallbacks(list):
    """The callbacks for model.fit, with handles on those a script may ask afterwards:
    `meter` (epoch_rates, epoch_input_wait), `checkpoint` (resumed_from), `preemption` and
    `summary` (`summary.add(final=dict(test_accuracy=acc))` adds to metrics.json's `final`, the
    metrics `tfdist sweep status` reads).

    tf-keras's fit takes the list's items as its callbacks. Keras 3's takes a list subclass as one
    callback (its tree utilities do not flatten subclasses): the list then passes each call on to
    its items, in order."""

    meter: Optional[ThroughputMeter] = None
    checkpoint: Optional[TrainingCheckpoint] = None
    preemption: Optional[PreemptionHandler] = None
    summary: Optional[RunSummary] = None
    watchdog: Optional[Watchdog] = None
    profiler = None  # tfdist.train.profiling.ProfileSteps, with profile_steps
    model = None
    params: dict = {}

    def set_model(self, model):
        self.model = model
        for callback in self:
            callback.set_model(model)

    def set_params(self, params):
        self.params = params
        for callback in self:
            callback.set_params(params)


_HOOKS = ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "on_batch_begin",
          "on_batch_end", "on_train_batch_begin", "on_train_batch_end", "on_test_begin",
          "on_test_end", "on_test_batch_begin", "on_test_batch_end", "on_predict_begin",
          "on_predict_end", "on_predict_batch_begin", "on_predict_batch_end")


def _each(hook: str):

    def call(self, *args, **kwargs):
        for callback in self:
            getattr(callback, hook)(*args, **kwargs)

    call.__name__ = hook
    return call


for _hook in _HOOKS:
    setattr(TrainingCallbacks, _hook, _each(_hook))


def _batches_taken(options: CallbackOptions, meter: Optional[ThroughputMeter]) -> tuple:
    """What the steps of this task have taken so far, as the watchdog reads it for progress
    inside a call: the batches rt.dataset's pipeline delivered and the samples the meter
    counted (None where there is no such counter)."""
    return (options.input_batches() if options.input_batches is not None else None,
            meter.samples_counted() if meter is not None else None)


def make_watchdog(engine, model_dir: Optional[str], timeout: Optional[float],
                  requeue: Optional[bool], input_batches) -> Watchdog:
    """This task's progress watchdog, its side channel under MODEL_DIR/progress (or
    $TFDIST_PROGRESS_DIR); without either it reports on its own rank only."""
    directory, board = progress_dir(model_dir), None
    if directory:
        try:
            board = ProgressBoard(directory, engine.rank)
        except OSError as e:  # the watchdog still ends a stalled run, naming only this rank
            log.warning(
                "progress watchdog: cannot write %s (%s): this rank's progress is not "
                "published; set TFDIST_PROGRESS_DIR to a shared, writable directory.", directory, e)
    return Watchdog(engine.rank,
                    timeout,
                    board,
                    ranks=engine.training_ranks(),
                    peers=engine.unreachable_tasks,
                    input_batches=input_batches,
                    host=engine.cluster.host,
                    report=lambda summary: end_after_failure(directory, summary, requeue))


@dataclasses.dataclass(frozen=True)
class CallbackOptions:
    """The options of `rt.callbacks(model_dir, **options)` and training_callbacks; any other name
    is a ConfigError naming it.

    batch_size: per replica; only for the checkpoint's identity and metrics.json (the meter counts
        the samples).
    checkpoint_steps: with model_dir, a checkpoint every this many steps too (0: at epoch ends
        only; parameter_server checkpoints at epoch ends only).
    requeue: on preemption, `scontrol requeue` the job: True, False, or None for
        $TFDIST_REQUEUE=1 (which the jobs/ scripts export; off otherwise).
    meter: the throughput meter (samples/s and input wait in each epoch's logs).
    tensorboard: with model_dir, TensorBoard logs in MODEL_DIR/logs (the chief).
    preemption: with model_dir, SIGTERM/SIGUSR1 end fit with an agreed stop, a checkpoint and
        exit 75.
    progress: log one line per epoch (the chief).
    identity: more that must match to resume (e.g. model="cnn").
    facts: more for metrics.json.
    watchdog_timeout: seconds without a completed step before the job ends naming the stuck
        rank(s) (tfdist.train.watchdog); None: $TFDIST_WATCHDOG_TIMEOUT, else auto; 0: off.
    input_batches: the batches this task's pipeline delivered (rt.dataset counts them).
    element_spec: the batches' element spec (rt.dataset records it): builds a Keras 3 model that
        fit has not built before the checkpoint is restored.
    input_skips: the steps rt.dataset skips (its skip_steps): a mid-epoch checkpoint is resumed at
        its step only where the input skips the steps done, else at the epoch's start.
    profile_steps: (A, B) or "A:B": TensorFlow's profiler traces training steps A..B (from 2)
        into MODEL_DIR/profile/<rank>/ and the chief writes MODEL_DIR/profile/summary.json
        (tfdist.train.profiling); None: $PROFILE_STEPS, else off.
    profile_ranks: the ranks that trace (a list, or "0,3"); None: $PROFILE_RANKS, else all.
    """

    batch_size: Optional[int] = None
    checkpoint_steps: int = 0
    requeue: Optional[bool] = None
    meter: bool = True
    tensorboard: bool = True
    preemption: bool = True
    progress: bool = False
    identity: Optional[dict[str, Any]] = None
    facts: Optional[dict[str, Any]] = None
    watchdog_timeout: Any = None
    input_batches: Optional[Callable[[], Optional[int]]] = None
    element_spec: Optional[Callable[[], Any]] = None
    input_skips: Optional[Callable[[], int]] = None
    profile_steps: Any = None
    profile_ranks: Any = None

    @classmethod
    def of(cls, **options: Any) -> CallbackOptions:
        """The options given by name, the others at their defaults."""
        return cls().replace(**options)

    def replace(self, **options: Any) -> CallbackOptions:
        """These options with those given by name; an unknown name is a ConfigError naming it."""
        check_options(options, [f.name for f in dataclasses.fields(self)], "rt.callbacks")
        return dataclasses.replace(self, **options)


def training_callbacks(engine,
                       model_dir: Optional[str] = None,
                       options: Optional[CallbackOptions] = None,
                       **keywords: Any) -> TrainingCallbacks:
    """The callbacks of this task's model.fit (every training task needs the same list).

    model_dir: checkpoints (every epoch, and every `checkpoint_steps` steps), resume, preemption
    (agreed stop, checkpoint, exit 75, requeue), TensorBoard logs and metrics.json, all written by
    the chief; and each rank's progress record (MODEL_DIR/progress/rank-N.json, the watchdog's).
    options: a CallbackOptions, or its fields as keywords (batch_size, checkpoint_steps, requeue,
    meter, tensorboard, preemption, progress, identity, facts, watchdog_timeout, input_batches,
    element_spec, input_skips, profile_steps, profile_ranks).
    """
    o = (options or CallbackOptions()).replace(**keywords)
    if model_dir and o.preemption:
        catch_signals()  # as early as the script lets us
    caps, chief = engine.capabilities, engine.is_chief
    batch_size, checkpoint_steps, requeue = o.batch_size, o.checkpoint_steps, o.requeue
    global_batch = batch_size * max(1, engine.num_replicas_in_sync) if batch_size else None
    cbs = TrainingCallbacks()
    timeout = timeout_setting(o.watchdog_timeout)
    if timeout != 0.0 and engine.roles.trains:
        cbs.watchdog = make_watchdog(engine, model_dir, timeout, requeue, o.input_batches)
        # first: the others' work gets its grace
        cbs.append(WatchdogCallback(cbs.watchdog, lambda: _batches_taken(o, cbs.meter)))
    profile_steps = steps_setting(o.profile_steps)
    if profile_steps and engine.roles.trains:
        from tfdist.train.profiling import make_profiler

        cbs.profiler = make_profiler(engine, model_dir, profile_steps,
                                     ranks_setting(o.profile_ranks))
        cbs.append(cbs.profiler)
    cbs.extend(engine.callbacks())
    statistics = None
    if engine.roles.trains and caps.replica_statistics:
        statistics = _LayerStatistics(engine)  # before the epoch-end checkpoint
        cbs.append(statistics)
    if o.meter:
        cbs.meter = ThroughputMeter(global_batch,
                                    warn=chief,
                                    gather=engine.gather_floats,
                                    batches_agreed=caps.batches_agreed and engine.world_size > 1)
        cbs.append(cbs.meter)
    if model_dir:
        if checkpoint_steps and not caps.batch_callbacks:
            log.info("checkpoint_steps=%d ignored: %s checkpoints at epoch ends only.",
                     checkpoint_steps, engine.name)
            checkpoint_steps = 0
        cbs.checkpoint = make_checkpoint(model_dir,
                                         chief,
                                         resume_identity(engine, batch_size, o.identity),
                                         checkpoint_steps,
                                         collective=caps.collective_checkpoint,
                                         element_spec=o.element_spec,
                                         input_skips=o.input_skips)
        if statistics is not None:
            cbs.checkpoint.before_write = statistics.average
        cbs.append(cbs.checkpoint)
        if o.tensorboard and chief:
            cbs.append(_TensorBoard(os.path.join(model_dir, "logs")))
        requeue = requeue_wanted() if requeue is None else requeue
        if o.preemption and caps.batch_callbacks:
            several = engine.world_size > 1
            cbs.preemption = StepPreemptionHandler(engine, cbs.checkpoint, requeue, several)
        elif o.preemption:
            cbs.preemption = PreemptionHandler(engine, cbs.checkpoint, requeue)
    if o.progress and chief:
        cbs.append(EpochLine())
    run = dict(strategy=engine.name,
               environment=engine.cluster.environment,
               num_replicas=engine.num_replicas_in_sync,
               world_size=engine.world_size,
               rank=engine.rank,
               global_batch_size=global_batch,
               per_replica_batch_size=batch_size)
    path = metrics_path(model_dir) if model_dir and chief else None
    cbs.summary = RunSummary(path,
                             dict(run, **(o.facts or {})),
                             cbs.meter,
                             cbs.checkpoint,
                             cbs.preemption,
                             warn=chief)
    cbs.append(cbs.summary)
    if cbs.preemption is not None:
        cbs.append(cbs.preemption)
    return cbs
