"""`profile_steps=(A, B)`: TensorFlow's profiler traces training steps A..B on every rank (or
`profile_ranks`) into MODEL_DIR/profile/<rank>/, and the chief writes MODEL_DIR/profile/
summary.json and one line naming the slow rank and its phase (tfdist.train.trace_phases).

- Nothing outside the steps: the profiler starts at the beginning of the call that runs step A
  and stops at the end of the one that runs step B (or when fit ends before B). Steps count from
  1 over the run, as the checkpoints count them; with `steps_per_execution` N one call runs N
  steps, and the calls that hold A..B are traced.
- Each traced call is marked by a `tfdist_step` trace event carrying its first step number and
  its number of steps (`_r=1`: TensorBoard's profile plugin takes it for a step too).
- Each rank, once its trace is written, reads it and publishes its numbers in
  MODEL_DIR/profile/<rank>/phases.json; the chief gathers them from there (files, never a
  collective: the training's collectives stay as they are) and writes the summary.
- Not under an engine whose batch hooks cannot run per step (parameter_server: the steps run on
  the workers, which TensorFlow traces through its profiler server): refused, with what to do.
- Not under multi_worker: TensorFlow's profiler crashes a worker at the trace's stop there now
  and then (docs/profiling.md, "Known problem"): refused, with what to do.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Optional

from tfdist.files import write_json
from tfdist.keras_compat import adapter
from tfdist.keras_compat.callback import Callback
from tfdist.train import trace_phases
from tfdist.train.progress_board import run_id
from tfdist.train.watchdog import slow_phase

log = logging.getLogger("tfdist")

GATHER_WAIT = 60.0  # seconds the chief waits at the end of fit for the other ranks' numbers


def profile_dir(model_dir: str) -> str:
    return os.path.join(model_dir, "profile")


def summary_path(model_dir: str) -> str:
    return os.path.join(profile_dir(model_dir), "summary.json")


class ProfileSteps(Callback):
    """Trace steps `steps` = (A, B) of this fit with TensorFlow's profiler when `trace`, into
    `model_dir`/profile/<rank>/; the chief (`chief`) gathers the numbers of `ranks` (those that
    trace) and writes the summary (`untraced_collectives`: trace_phases.summarize's)."""

    def __init__(self,
                 model_dir: str,
                 rank: int,
                 steps: tuple[int, int],
                 trace: bool,
                 chief: bool,
                 ranks: list[int],
                 untraced_collectives: bool = False):
        super().__init__()
        # Reads no logs: Keras need not fetch them per step. (On the instance: Callback.__init__
        # sets it False there.)
        self._supports_tf_logs = True
        self.model_dir, self.rank, self.steps = model_dir, rank, steps
        self.trace, self.chief, self.ranks = trace, chief, sorted(ranks)
        self.untraced_collectives = untraced_collectives  # Horovod's: trace_phases.summarize
        self.logdir = os.path.join(profile_dir(model_dir), str(rank))
        self.run = run_id()
        self.summary: Optional[dict] = None  # the chief's, once written
        self._running = False
        self._done = False  # traced (or past B): nothing more to start
        self._context = None
        self._epoch, self._count, self._call = 0, 0, (0, 0)
        self._sessions_before: set[str] = set()
        self._polled = 0.0
        self._started_at: Optional[int] = None  # the first step of the call that started it

    # -- step numbers ----------------------------------------------------------------------

    def _first_step(self, batch: int) -> int:
        per_epoch = (self.params or {}).get("steps")
        return self._epoch * per_epoch + batch + 1 if per_epoch else self._count + 1

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    # -- tracing -----------------------------------------------------------------------------

    def on_train_begin(self, logs=None):
        if self.trace:
            os.makedirs(self.logdir, exist_ok=True)
            mine = os.path.join(self.logdir, "phases.json")
            if os.path.exists(mine):  # an earlier run's: never taken for this one's
                os.unlink(mine)
            self._sessions_before = set(trace_phases.trace_files(self.logdir))

    def on_train_batch_begin(self, batch, logs=None):
        import tensorflow as tf

        first = self._first_step(batch)
        last = first + adapter(self.model).steps_per_execution(self.model) - 1
        self._call = (first, last)
        if not self.trace or self._done:
            return
        a, b = self.steps
        if not self._running and last >= a and first <= b:
            tf.profiler.experimental.start(self.logdir)
            self._running, self._started_at = True, first
            log.info("profile: tracing steps %d-%d into %s", a, b, self.logdir)
        if self._running:
            self._context = tf.profiler.experimental.Trace(trace_phases.STEP_EVENT,
                                                           step_num=first,
                                                           steps=last - first + 1,
                                                           _r=1)
            self._context.__enter__()

    def on_train_batch_end(self, batch, logs=None):
        first, last = self._call
        self._count = last
        if self._context is not None:
            self._context.__exit__(None, None, None)
            self._context = None
        if last >= self.steps[1]:
            if self._running:
                self._stop()
            self._done = True
            # The others' numbers come soon after: looked for at most once a second.
            if self.chief and self.summary is None and time.monotonic() - self._polled >= 1.0:
                self._polled = time.monotonic()
                self._gather(0.0)

    def on_epoch_end(self, epoch, logs=None):
        if self._done and self.chief and self.summary is None:
            self._gather(0.0)

    def on_train_end(self, logs=None):
        if self._context is not None:
            self._context.__exit__(None, None, None)
            self._context = None
        if self._running:
            log.info(
                "profile: fit ended at step %d, before step %d: the trace holds the steps "
                "traced so far", self._count, self.steps[1])
            self._stop()
        elif not self._done and self.trace:
            log.info("profile: fit ended at step %d, before step %d: nothing traced", self._count,
                     self.steps[0])
        if self.chief and self.summary is None and self._count >= self.steps[0]:
            self._gather(GATHER_WAIT)

    def _stop(self) -> None:
        import tensorflow as tf

        self._running = False
        self._done = True
        # Writing and reading the trace hold this rank (and the others, at the next all-reduce)
        # for a while: the progress watchdog gives it a slow phase's grace.
        slow_phase()
        tf.profiler.experimental.stop()
        if not any(n.startswith("events.out.tfevents") for n in os.listdir(self.logdir)):
            # TensorBoard's profile plugin lists the traces of the directories it takes for
            # runs, those that hold an event file: with one, `tensorboard --logdir
            # MODEL_DIR/profile` lists every rank's.
            tf.summary.create_file_writer(self.logdir).close()
        new = [f for f in trace_phases.trace_files(self.logdir) if f not in self._sessions_before]
        record = dict(rank=self.rank,
                      run=self.run,
                      trace=new[-1] if new else None,
                      started_at_step=self._started_at,
                      stopped_after_step=self._count)
        try:
            steps = trace_phases.step_phases(trace_phases.read_space(new[-1])) if new else []
            record.update(trace_phases.rank_phases(steps))
        except Exception as e:  # a trace tfdist cannot read must not end the training
            log.warning("profile: cannot read this rank's trace %s: %s", record["trace"], e)
            record["error"] = str(e)
        write_json(os.path.join(self.logdir, "phases.json"), record)

    # -- the chief's summary -----------------------------------------------------------------

    def _read(self, rank: int) -> Optional[dict]:
        path = os.path.join(profile_dir(self.model_dir), str(rank), "phases.json")
        try:
            with open(path) as f:
                record = json.load(f)
        except (OSError, ValueError):
            return None
        return record if record.get("run") == self.run else None

    def _gather(self, wait: float) -> None:
        """Write the summary once every tracing rank has published (or after `wait` s, with
        those that have)."""
        deadline = time.monotonic() + wait
        while True:
            records = {r: self._read(r) for r in self.ranks}
            missing = [r for r, record in records.items() if record is None]
            if not missing or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        if missing and wait == 0.0:
            return  # asked again later (the next step, the epoch's end, the end of fit)
        summary = trace_phases.summarize(
            {
                r: record
                for r, record in records.items() if record is not None
            }, self.steps, self.untraced_collectives)
        summary.update(missing_ranks=missing,
                       traces={
                           str(r): rec.get("trace")
                           for r, rec in records.items() if rec
                       })
        if missing:
            summary["line"] += f"; no trace from rank(s) {', '.join(map(str, missing))}"
        write_json(summary_path(self.model_dir), summary)
        self.summary = summary
        log.info("%s; %s", summary["line"], summary_path(self.model_dir))


def make_profiler(engine, model_dir: Optional[str], steps: tuple[int, int],
                  ranks: Optional[frozenset[int]]) -> ProfileSteps:
    """This task's ProfileSteps: it traces when its rank is in `ranks` (None: every training
    rank); a ConfigError when this engine cannot trace steps, without a model directory, or for
    ranks the job does not have."""
    from tfdist.errors import ConfigError

    given = f"profile_steps={steps[0]}:{steps[1]}"
    if not engine.capabilities.batch_callbacks:
        raise ConfigError(
            f"{given} under {engine.name}: not supported yet: its steps run on the workers, "
            "which Keras's batch hooks do not reach. Trace a worker with TensorFlow's profiler "
            "server and client (tf.profiler.experimental.server.start on the worker, "
            "tf.profiler.experimental.client.trace from another process), or profile the same "
            "model under --strategy=horovod.")
    if engine.name == "multi_worker":
        raise ConfigError(
            f"{given} under multi_worker: refused: TensorFlow's profiler (2.18 and 2.21 "
            "measured) kills a worker when the trace stops in about 1 run in 4 there (a crash "
            "in tsl's TraceMeRecorder::Consume, 'free(): invalid size' or a segmentation fault, "
            "with the collective ops' events of a multi-worker step). Profile the same script "
            "under --strategy=horovod (every rank traced) or in one process "
            "(--strategy=mirrored); docs/profiling.md, 'Known problem'.")
    if not model_dir:
        raise ConfigError(
            f"{given} needs a model directory (the traces go to MODEL_DIR/profile/<rank>/, where "
            "the chief also gathers the ranks' numbers): give --model_dir, "
            "rt.callbacks(model_dir=...) or $MODEL_DIR.")
    training = list(engine.training_ranks())
    unknown = sorted(set(ranks or ()) - set(training))
    if unknown:
        raise ConfigError(f"profile_ranks={','.join(map(str, sorted(ranks)))}: rank(s) "
                          f"{', '.join(map(str, unknown))} do not train in this job (its training "
                          f"ranks: {', '.join(map(str, training))}).")
    traced = sorted(ranks) if ranks is not None else training
    # Horovod all-reduces on a background thread of its own, which TensorFlow does not trace.
    return ProfileSteps(model_dir, engine.rank, steps, engine.rank in traced, engine.is_chief,
                        traced, engine.name == "horovod")
