"""The script's own Keras callbacks and saves with several training tasks: one writer, the chief.

Every training task of multi_worker (and horovod) runs the script's `fit` with the script's
callbacks and then its `model.save(...)`, all naming the same paths. Measured (2026-11-26,
TensorFlow 2.18, 2 workers on one machine): Keras 3's ModelCheckpoint, BackupAndRestore,
TensorBoard and CSVLogger write the same files from both tasks, and BackupAndRestore's two
`latest.weights.h5` writes collided (h5py "unable to lock file": the job died); tf-keras's
ModelCheckpoint, BackupAndRestore and TensorBoard write a non-chief's copy to a `workertemp_<id>`
folder inside the user's directory and remove it, and its `model.save` / `save_weights` after
fit have no such logic (both tasks wrote `final.weights.h5`, one died on its lock).

Under MultiWorkerMirrored Keras's save runs collectives over the tasks (tf-keras: "all workers need
to perform `save()`"). Measured (2026-11-27, TensorFlow 2.18, 2 workers, the script's `if chief:
model.save(...)` / `save_weights(...)` after fit, the other worker not saving): Keras 3's save
waited in a broadcast (it makes a throwaway `Optimizer(1.0)`, whose variables the strategy makes by
broadcasting the chief's value), tf-keras's in an all-reduce (reading a metric's sync-on-read
total); each failed once the other worker had ended (its file left partial: unloadable, or without
the optimizer's part), and met the other worker's `evaluate` collectives when it evaluated after
("Collective instance ... expected type"; tf-keras paired them silently and that evaluate failed).
So under multi_worker of several tasks every `model.save` / `save_weights` (the script's and the
callbacks', on every task) reads this task's own copy of each variable and waits for nobody
(tfdist.distribute.own_values): a chief's save alone writes its file, complete, with its weights
(every task's). An unchanged script saves on every task, which works as before. On a task that
trains and is not the chief, tfdist:
- points the path of each ModelCheckpoint, CSVLogger and TensorBoard to a folder of its own
  under a temporary directory of the task (removed at exit; a task killed leaves it, in its
  node's temporary directory);
- lets BackupAndRestore read the chief's backup at the start of fit (so every task resumes from
  the same epoch) and write its own to that temporary directory;
- sends every `model.save` / `model.save_weights` (the script's, and the callbacks') to one file
  in that directory, the previous one removed first: one file at most on a task's disk.
EarlyStopping and ReduceLROnPlateau need nothing: the logs they read are the strategy's metrics,
the same numbers on every task (measured: both Kerases, each task on other samples), so every
task stops at the same epoch and sets the same rate. One task (mirrored), parameter_server (only
its chief runs fit) and the chief itself are left as Keras made them.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import sys
import tempfile

from tfdist.distribute import own_values
from tfdist.errors import TfdistError
from tfdist.keras_compat import user_fit

log = logging.getLogger("tfdist")

_MARK = "_tfdist_chief_path"  # on a callback already redirected: the path the script gave it
_scratch: list = []  # this task's temporary directory, once made
_rank: list = []  # this task's rank, for the directory's name
_PATHS = {"ModelCheckpoint": "filepath", "CSVLogger": "filename", "TensorBoard": "log_dir"}
_KERAS_CALLBACKS = ("keras.src.callbacks", "tf_keras.src.callbacks")  # Keras 3, tf-keras
_OWN_VALUES = f"{__name__}.own_values"  # the hook of saves that read this task's values


def install(engine) -> None:
    """For a training task: where a save would run collectives over the tasks (multi_worker of
    several), every `model.save` / `save_weights` reads this task's own values; on a task that
    is not the chief of several, the script's callbacks and saves write to this task's temporary
    directory; elsewhere Keras's own, unchanged."""
    reads_own = engine.capabilities.collective_checkpoint and engine.world_size > 1
    for method in ("save", "save_weights"):
        if reads_own:
            user_fit.on(method, _OWN_VALUES, _save_own_values)
        else:
            user_fit.off(method, _OWN_VALUES)
    if engine.is_chief or engine.world_size < 2:
        for method in ("fit", "save", "save_weights"):
            user_fit.off(method, __name__)
        return
    _rank[:] = [engine.rank]
    user_fit.on("fit", __name__, _redirect_callbacks)
    user_fit.on("save", __name__, _redirect_save)
    user_fit.on("save_weights", __name__, _redirect_save)


def scratch() -> str:
    """This task's temporary directory (made on first use, removed at exit)."""
    if not _scratch:
        rank = f"rank{_rank[0]}-" if _rank else ""
        path = tempfile.mkdtemp(prefix=f"tfdist-own-writes-{rank}")
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        _scratch.append(path)
    return _scratch[0]


def _elsewhere(path) -> str:
    """A fresh folder of this task's temporary directory, with `path`'s last name in it."""
    folder = tempfile.mkdtemp(dir=scratch())
    return os.path.join(folder, os.path.basename(os.path.normpath(os.fspath(path))))


def _redirect_callbacks(call: user_fit.Call) -> None:
    callbacks = call.get("callbacks") or []
    for callback in getattr(callbacks, "callbacks", callbacks):  # a list or a CallbackList
        if hasattr(callback, _MARK):
            continue  # an earlier fit's
        for kind, attribute in _PATHS.items():
            if _is(callback, kind):
                chief_path = getattr(callback, attribute)
                setattr(callback, attribute, _elsewhere(chief_path))
                setattr(callback, _MARK, chief_path)
                _said(kind, chief_path, getattr(callback, attribute))
        if _is(callback, "BackupAndRestore"):
            _backup_reads_chiefs(callback)
            setattr(callback, _MARK, callback.backup_dir)
            _said("BackupAndRestore", callback.backup_dir, "this task's temporary directory")


def _said(what: str, chief_path, own_path) -> None:
    log.info("%s: the chief writes %s; this task writes %s (removed at exit).", what, chief_path,
             own_path)


def _is(callback, kind: str) -> bool:
    """Whether `callback` is (a subclass of) Keras's `kind`, of either Keras the script loaded."""
    classes = tuple(
        getattr(sys.modules[module], kind) for module in _KERAS_CALLBACKS
        if module in sys.modules and hasattr(sys.modules[module], kind))
    return bool(classes) and isinstance(callback, classes)


def _backup_reads_chiefs(callback) -> None:
    """BackupAndRestore restores from the chief's `backup_dir` when fit begins and backs up to
    this task's temporary directory."""
    chief_dir, own_dir = callback.backup_dir, _elsewhere(callback.backup_dir)
    keras_begin = callback.on_train_begin
    if hasattr(callback, "_weights_path"):  # Keras 3: paths set when made, read at train begin
        names = ("_weights_path", "_training_metadata_path", "_prev_weights_path",
                 "_prev_training_metadata_path")
        chief_paths = {name: getattr(callback, name) for name in names}

        def move(to):
            callback.backup_dir = to
            for name, path in chief_paths.items():
                setattr(callback, name, os.path.join(to, os.path.relpath(path, chief_dir)))

        def on_train_begin(logs=None):
            move(chief_dir)
            keras_begin(logs)
            move(own_dir)
    else:  # tf-keras: a WorkerTrainingState made at train begin reads and writes the backup

        def on_train_begin(logs=None):
            import tensorflow as tf

            callback.backup_dir = own_dir  # its writer there (it restores nothing: empty)
            try:
                keras_begin(logs)
            finally:
                callback.backup_dir = chief_dir
            state = callback._training_state
            own_reader = state.read_checkpoint_manager
            state.read_checkpoint_manager = tf.train.CheckpointManager(
                own_reader.checkpoint,
                directory=os.path.join(chief_dir, os.path.basename(own_reader.directory)),
                max_to_keep=own_reader._max_to_keep)
            state.restore()

    callback.on_train_begin = on_train_begin


def _save_own_values(call: user_fit.Call) -> None:
    """Keras's save reads this task's own copy of each variable (every task holds the same
    weights) and makes its throwaway variables plain: no collective waits for another task.
    TensorFlow's own formats (tf-keras's SavedModel, a TF checkpoint) still reduce each on-read
    variable over the workers: a failure there is said in words."""
    if _tensorflow_format(call):
        call.around.append(_saved_by_every_worker())
    call.around.append(own_values.own_copies())


class ChiefOnlySaveError(TfdistError):
    """A save in one of TensorFlow's own formats, on some workers only, under multi_worker."""


def _tensorflow_format(call: user_fit.Call) -> bool:
    """Whether Keras saves this call in TensorFlow's own format (tf-keras: SavedModel for `save`,
    a TF checkpoint for `save_weights`)."""
    from tfdist.keras_compat import adapter

    path = call.get("filepath")
    if not isinstance(path, (str, os.PathLike)):
        return False
    return adapter(call.model).saves_in_tensorflow_format(os.fspath(path), call.get("save_format"))


@contextlib.contextmanager
def _saved_by_every_worker():
    import tensorflow as tf

    try:
        yield
    except tf.errors.OpError as err:
        raise ChiefOnlySaveError(
            f"model.save / save_weights in TensorFlow's own format (SavedModel, a TF checkpoint) "
            f"failed under multi_worker ({type(err).__name__}): TensorFlow's saver reduces "
            "the metrics' on-read variables over every worker, so every worker must make this "
            "save, and here another had not (a save on the chief only?). Fix: call it on every "
            "worker (tfdist writes the other workers' copies to a temporary directory), or save "
            "as .keras / .weights.h5, which the chief can write alone.") from err


def _redirect_save(call: user_fit.Call) -> None:
    path = call.get("filepath")
    if not isinstance(path, (str, os.PathLike)):
        return  # e.g. an open h5py file: the script's own
    folder = os.path.join(scratch(), "save")
    shutil.rmtree(folder, ignore_errors=True)  # the previous save's: nobody reads it
    os.makedirs(folder)
    call.arguments["filepath"] = os.path.join(folder, os.path.basename(os.fspath(path)))
