"""Backup and restore of the whole training state, written so that a crash never loses it.

One checkpoint is a directory `MODEL_DIR/checkpoints/ckpt-<step>` holding a tf.train.Checkpoint
(weights, optimizer slots and step counter -- hence the learning-rate schedule -- and the epoch
and step within it) and `meta.json` (what was trained how: model, strategy, world size, global
batch, steps per epoch, data-order seed). It is written under a temporary name and renamed into
place, so a crash mid-write leaves the previous checkpoint whole. Only the chief writes there;
where the save is collective the other workers write into a temporary directory removed at once.

Test-only: with TFDIST_TEST_EXIT_AFTER_STEP=N in the environment, every task exits (status 3)
right after the step checkpoint of global step N, as if killed there: the tests of mid-epoch
resume need a stop at a known step. With TFDIST_TEST_EXIT_WHILE_SAVING=N the chief exits so in
the middle of writing the checkpoint of global step N (its state written, not yet in place), as
a crash mid-write would, on any machine however fast it writes. Neither is a user setting.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import re
import shutil
import tempfile
from typing import Any, Callable, Optional

import tensorflow as tf

from tfdist import env_vars
from tfdist.distribute.default_strategy import outside
from tfdist.errors import ConfigError
from tfdist.files import TMP_PREFIX, replacing
from tfdist.keras_compat import adapter
from tfdist.keras_compat.callback import Callback
from tfdist.train.watchdog import slow_phase

log = logging.getLogger("tfdist")

CHECKPOINTS = "checkpoints"
EXIT_AFTER_STEP = env_vars.TEST_EXIT_AFTER_STEP.name  # test-only, see the module docstring
EXIT_WHILE_SAVING = env_vars.TEST_EXIT_WHILE_SAVING.name  # test-only, see the module docstring
_NAME = re.compile(r"^ckpt-(\d+)$")
# What must match for a resume to continue the same training (where both runs say).
IDENTITY = ("model", "keras", "strategy", "world_size", "global_batch_size")


class ResumeRefused(ConfigError):
    """The checkpoint in the model directory belongs to a different training."""


def latest(model_dir: str, epoch_start: bool = False) -> Optional[tuple[str, dict[str, Any]]]:
    """(path, meta) of the newest complete checkpoint under model_dir (with `epoch_start`: the
    newest at an epoch's start), or None."""
    root = os.path.join(model_dir, CHECKPOINTS)
    for _, name in reversed(_complete(root)):
        path = os.path.join(root, name)
        meta = _meta(path)
        if not epoch_start or at_epoch_start(meta):
            return path, meta
    return None


def at_epoch_start(meta: dict[str, Any]) -> bool:
    """Whether a checkpoint was written between two epochs (after the last step of one)."""
    step, per_epoch = meta.get("step", 0), meta.get("steps_per_epoch")
    return step == 0 or bool(per_epoch and step >= per_epoch)


def _complete(root: str) -> list[tuple[int, str]]:
    """(global step, name) of the complete checkpoints under root, oldest first."""
    if not os.path.isdir(root):
        return []
    return sorted(
        (int(m.group(1)), name) for name in os.listdir(root)
        if (m := _NAME.match(name)) and os.path.isfile(os.path.join(root, name, "meta.json")))


def _meta(path: str) -> dict[str, Any]:
    with open(os.path.join(path, "meta.json")) as f:
        return json.load(f)


def check_resume(meta: dict[str, Any], identity: dict[str, Any], path: str) -> list[str]:
    """Raise ResumeRefused when the checkpoint's training differs; return notes on what changed
    that is safe (world size with the same global batch)."""
    differs = {
        k: (meta[k], identity[k])
        for k in IDENTITY if k in meta and k in identity and meta[k] != identity[k]
    }
    notes = []
    if "world_size" in differs and "global_batch_size" not in differs:
        old, new = differs.pop("world_size")
        notes.append(f"resuming a {old}-task checkpoint with {new} tasks: safe, the global batch "
                     f"({identity.get('global_batch_size', 'unknown')}) is the same")
    if differs:
        what = "; ".join(f"{k} was {old!r}, now {new!r}" for k, (old, new) in differs.items())
        raise ResumeRefused(
            f"Cannot resume from {path}: {what}. Use a new --model_dir for a different training, "
            f"or restore the old settings to continue this one" +
            (" (keep the global batch: --batch_size x replicas)" if "global_batch_size" in
             differs else "") + ".")
    return notes


@dataclasses.dataclass(frozen=True)
class Resume:
    """Where a run continues: `epoch` (0-based, the one to run next) and `step` steps into it."""

    epoch: int = 0
    step: int = 0
    steps_done: int = 0  # steps since the start of training, all epochs
    path: Optional[str] = None  # the checkpoint, None for a new run
    seed: Optional[int] = None  # the data-order seed the checkpoint was trained with


def resume_point(model_dir: Optional[str], identity: Optional[dict[str, Any]] = None) -> Resume:
    """Where training in model_dir continues (Resume() for a new run); with `identity`, refuse a
    checkpoint of a different training first (ResumeRefused)."""
    found = latest(model_dir) if model_dir else None
    if found is None:
        return Resume()
    path, meta = found
    if identity is not None:
        check_resume(meta, identity, path)
    epoch, step, per_epoch = meta["epoch"], meta["step"], meta.get("steps_per_epoch")
    if per_epoch and step >= per_epoch:  # saved at the last step of an epoch
        epoch, step = epoch + 1, 0
    done = epoch * per_epoch + step if per_epoch else meta.get("global_step", 0)
    return Resume(epoch, step, done, path, meta.get("seed"))


def describe_model(model) -> str:
    """What a checkpoint's model is, when the caller names none: class and size. A subclassed
    model is not built before its first step (count_params() refuses it); its variables made so
    far are counted, the same at every start of the same script."""
    count = sum(math.prod(int(d) for d in v.shape) for v in model.weights)
    return f"{type(model).__name__} with {count} parameters"


class OptimizerNotCheckpointable(ConfigError):
    """This Keras's optimizer cannot be saved by tf.train.Checkpoint (Keras 3.0)."""


def check_checkpointable(optimizer) -> None:
    """The optimizer can be saved by tf.train.Checkpoint, or a ConfigError with the fix. Keras
    3.0's optimizers cannot (they are Trackable from 3.1 on; measured with TensorFlow 2.16.2:
    "`Checkpoint` was expecting optimizer to be a trackable object")."""
    if isinstance(optimizer, tf.__internal__.tracking.Trackable):
        return
    import keras

    raise OptimizerNotCheckpointable(
        f"Keras {keras.__version__}'s optimizer ({type(optimizer).__name__}) cannot be saved by "
        "tf.train.Checkpoint, which tfdist's checkpoints (model_dir) use: Keras makes its "
        "optimizers trackable from 3.1 on. Fix: install a newer Keras (`pip install "
        "'keras>=3.1'`), or build the model with tf-keras (`export TF_USE_LEGACY_KERAS=1`).")


class TrainingCheckpoint(Callback):
    """Save the training state at each epoch end (and every `save_steps` steps); restore it when
    training starts, continuing at the saved epoch and step. For tf-keras and Keras 3 models alike
    (Keras 3 calls the same hooks; where it starts is told through keras_compat.keras3_adapter).

    Every training task must use it (the save is collective under multi_worker).
    """

    def __init__(self,
                 model_dir: str,
                 is_chief: bool,
                 identity: dict[str, Any],
                 save_steps: int = 0,
                 keep: int = 2,
                 collective: bool = False,
                 element_spec: Optional[Callable[[], Any]] = None,
                 input_skips: Optional[Callable[[], int]] = None):
        super().__init__()
        if save_steps < 0 or keep < 1:
            raise ConfigError(f"save_steps={save_steps}, keep={keep}: expected save_steps >= 0 "
                              "and keep >= 1.")
        self.model_dir, self.is_chief, self.identity = model_dir, is_chief, dict(identity)
        self.save_steps, self.keep, self.collective = save_steps, keep, collective
        self.element_spec = element_spec
        # The steps rt.dataset skips (0: the input starts at its beginning, as NumPy arrays and
        # a script's own datasets do): whether a mid-epoch checkpoint can be resumed at its step.
        self.input_skips = input_skips
        self.root = os.path.join(model_dir, CHECKPOINTS)
        self.resumed_from: Optional[tuple[int, int]] = None
        self.suspend_epoch_save = False  # set on preemption: a cut epoch is not a finished one
        # This task's own (every task counts alike): plain variables outside the program's
        # default strategy, whose variables MultiWorkerMirrored makes by a collective.
        with outside():
            self._epoch_var = tf.Variable(0, dtype=tf.int64, trainable=False)
            self._step_var = tf.Variable(0, dtype=tf.int64, trainable=False)
        self._epoch = 0
        self._ckpt = None
        # False: the next fit restores nothing, it goes on from this process's state (tfdist
        # train's fit after its first epoch, at the steps_per_execution chosen then).
        self.restore = True
        # Called with the model before each write, on every rank (e.g. a collective average).
        self.before_write: Optional[Callable[[Any], None]] = None

    # -- Keras hooks -------------------------------------------------------------------------

    def on_train_begin(self, logs=None):
        model = self.model
        keras = adapter(model)
        if not model.built:
            keras.build_to_restore(model, self.element_spec() if self.element_spec else None)
        with model.distribute_strategy.scope():
            # Slot variables exist before the restore, so every one of them is filled. A
            # subclassed tf-keras model makes its variables in its first step: the optimizer
            # builds then, and the restore fills them as they are made (deferred).
            keras.build_optimizer(model)
        check_checkpointable(model.optimizer)
        self._ckpt = tf.train.Checkpoint(model=model,
                                         optimizer=model.optimizer,
                                         epoch=self._epoch_var,
                                         step=self._step_var)
        self.identity.setdefault("model", describe_model(model))
        self.identity["keras"] = keras.GENERATION  # the variables' names differ between them
        self.identity["steps_per_epoch"] = self.params.get("steps")
        misaligned = keras.execution_misaligned(model, self.params.get("steps"))
        if misaligned:
            raise ConfigError(f"{misaligned} (tfdist's checkpoints, in {self.model_dir})")
        if self.is_chief:
            self._remove_partial()
        found = latest(self.model_dir) if self.restore else None
        if found is not None:
            for note in check_resume(found[1], self.identity, found[0]):
                log.info("%s", note)
            found, how = self._where_the_input_allows(*found)
        if found is not None:
            path, meta = found
            self._ckpt.read(os.path.join(path, "state")).assert_existing_objects_matched()
            self.resumed_from = (int(self._epoch_var.numpy()), int(self._step_var.numpy()))
            log.info("resuming from %s (epoch %d, step %d), %s", path, *self.resumed_from, how)
            # tf-keras asks this callback where to start (the hook of its own BackupAndRestore);
            # Keras 3 is told (tfdist.keras_compat.keras3_adapter).
            keras.start_from(model, self, self.params.get("steps") or 0)

    def _where_the_input_allows(self, path: str, meta: dict[str, Any]):
        """(path, meta) of the checkpoint this fit resumes from, or None to start over, and how it
        resumes, for the log: the newest (`path`) where it is at an epoch's start or this fit's
        input skips the steps done (rt.dataset's skip_steps); else the newest at an epoch's start,
        the epoch trained again: an input that starts at its beginning would train the steps
        after a mid-epoch checkpoint on the epoch's first batches."""
        if at_epoch_start(meta):
            return (path, meta), "at the epoch's start"
        skips = self.input_skips() if self.input_skips is not None else 0
        if skips:
            return (path, meta), f"at that step: the input skips {skips} steps (rt.dataset)"
        mid = (
            f"{os.path.basename(path)} (epoch {meta['epoch']}, step {meta['step']}) is mid-epoch "
            "and this fit's input does not skip the steps done (rt.dataset(fn, "
            "skip_steps=rt.resume().steps_done) resumes at the step)")
        found = latest(self.model_dir, epoch_start=True)
        if found is None:
            log.warning("starting over: %s, and no checkpoint at an epoch's start is kept", mid)
            return None, ""
        return found, f"at the epoch's start: {mid}"

    def maybe_load_initial_counters_from_ckpt(self, steps_per_epoch, initial_epoch, mode=None):
        if self.resumed_from is None:
            return initial_epoch, 0
        epoch, step = self.resumed_from
        if steps_per_epoch and step >= steps_per_epoch:  # saved at the last step of an epoch
            epoch, step = epoch + 1, 0
        return epoch, step

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if not self.suspend_epoch_save:
            self.save(epoch + 1, 0)

    def on_train_end(self, logs=None):
        adapter(self.model).fit_ended(self.model, self)

    # -- saving ------------------------------------------------------------------------------

    def save(self, epoch: int, step: int) -> Optional[str]:
        """Write the state as of `step` steps into `epoch`; returns the chief's checkpoint path."""
        slow_phase()  # the progress watchdog gives a write its longer grace
        if self.before_write is not None:
            self.before_write(self.model)
        self._epoch_var.assign(epoch)
        self._step_var.assign(step)
        global_step = self.global_step(epoch, step)
        if not self.is_chief:
            if self.collective:  # take part in the collective read, keep nothing
                scratch = tempfile.mkdtemp(prefix="tfdist-worker-ckpt-")
                try:
                    self._ckpt.write(os.path.join(scratch, "state"))
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
            return None
        final = os.path.join(self.root, f"ckpt-{global_step}")
        with replacing(final, folder=True, tag=f"ckpt-{global_step}") as tmp:
            self._ckpt.write(os.path.join(tmp, "state"))
            if os.environ.get(EXIT_WHILE_SAVING) == str(global_step):
                _exit_as_if_killed(global_step, EXIT_WHILE_SAVING, "while writing its checkpoint")
            meta = dict(self.identity, epoch=epoch, step=step, global_step=global_step)
            with open(os.path.join(tmp, "meta.json"), "w") as f:
                json.dump(meta, f, indent=2, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
        self._prune(global_step)
        # Epoch ends are routine (shown with --verbosity=1); a mid-epoch save is news.
        log.log(logging.INFO if step else logging.DEBUG, "checkpoint %s (epoch %d, step %d)", final,
                epoch, step)
        return final

    def global_step(self, epoch: int, step: int) -> int:
        """The optimizer's step count, as of `step` steps into `epoch`. Where that optimizer never
        stepped though training did (a train_step that steps optimizers of its own, as a GAN's;
        compile() gave the model a default one), the steps trained, so that checkpoints still
        count up."""
        count = int(self.model.optimizer.iterations.numpy())
        per_epoch = self.params.get("steps")
        if count == 0 and per_epoch:
            count = epoch * per_epoch + step
        return count

    def _prune(self, written: int) -> None:
        """Keep the newest `keep` checkpoints and the newest at an epoch's start (where a fit whose
        input cannot skip resumes); remove those newer than the one just `written` (left by a run
        that resumed from an earlier one: this run trains their steps again)."""
        done = _complete(self.root)
        kept = [name for step, name in done if step <= written]
        keep = set(kept[-self.keep:])
        for name in reversed(kept):
            if at_epoch_start(_meta(os.path.join(self.root, name))):
                keep.add(name)
                break
        for _, name in done:
            if name not in keep:
                shutil.rmtree(os.path.join(self.root, name), ignore_errors=True)

    def _remove_partial(self) -> None:
        """Temporary checkpoints of a run that crashed while writing."""
        if os.path.isdir(self.root):
            for name in os.listdir(self.root):
                if name.startswith(TMP_PREFIX):
                    log.info("removing %s, left by an interrupted save", name)
                    shutil.rmtree(os.path.join(self.root, name), ignore_errors=True)


class StepCheckpoint(TrainingCheckpoint):
    """TrainingCheckpoint that also saves every `save_steps` steps. A separate class because
    batch-level callbacks are refused under ParameterServerStrategy."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Reads no logs: Keras need not fetch them after every step. On the instance: tf-keras's
        # Callback.__init__ sets it False there, which hid a class attribute (logs fetched to the
        # host after every step).
        self._supports_tf_logs = True

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._counted = self.global_step(*(self.resumed_from or (0, 0)))

    def on_train_batch_end(self, batch, logs=None):
        step = adapter(self.model).steps_done(self.model, batch)
        global_step = self.global_step(self._epoch, step)
        # Saved where the count passes a multiple of save_steps: a call of steps_per_execution N
        # moves it by N, and the calls a resumed Keras 3 fit skips do not move it.
        if global_step // self.save_steps > self._counted // self.save_steps:
            self.save(self._epoch, step)
            if os.environ.get(EXIT_AFTER_STEP) == str(global_step):
                _exit_as_if_killed(global_step)
        self._counted = global_step


def _exit_as_if_killed(global_step: int,
                       hook: str = EXIT_AFTER_STEP,
                       when: str = "after this step's checkpoint") -> None:
    """The test hooks: end this task now, without Keras's or Python's teardown."""
    import sys

    print(f"tfdist: {hook}={global_step}: exiting {when}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(3)


def make_checkpoint(model_dir: str,
                    is_chief: bool,
                    identity: dict[str, Any],
                    save_steps: int = 0,
                    collective: bool = False,
                    element_spec: Optional[Callable[[], Any]] = None,
                    input_skips: Optional[Callable[[], int]] = None) -> TrainingCheckpoint:
    cls = StepCheckpoint if save_steps else TrainingCheckpoint
    return cls(model_dir,
               is_chief,
               identity,
               save_steps=save_steps,
               collective=collective,
               element_spec=element_spec,
               input_skips=input_skips)
