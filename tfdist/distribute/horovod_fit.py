"""Horovod on the two lines: the script's own `compile` and `fit` made Horovod's, both Kerases.

`tfdist.init(strategy="horovod")` (or `tfdist launch --strategy horovod`, `jobs/horovod.sbatch`)
registers, with `install(engine)`, hooks into every `compile` and `fit` of the script
(tfdist.keras_compat.user_fit):

- compile: the optimizer (a name such as "adam" first made by the model's Keras, as `compile`
  would) is wrapped by the engine (HorovodEngine.wrap_optimizer): the gradients averaged over
  the ranks. One already distributed (`hvd.DistributedOptimizer(...)`, `rt.optimizer(...)`) is
  left as it is: the script distributes itself, and its `fit` is then left as it is too (its data
  is its own to split, as Horovod's examples do).
- fit, where compile wrapped the optimizer:
  - the data split per rank (tfdist.distribute.rank_split): `batch_size` (Keras's default 32) is the
    global batch, each rank trains batch_size // N of it per step (a batch_size not divisible by
    N is a ConfigError). NumPy arrays, with `validation_split` taken first as Keras takes it (the
    last fraction, before any shuffle), are cut per rank: step k of every rank trains global
    batch k, every sample once per epoch over the ranks; `shuffle` then shuffles each rank's own
    samples. A batched `tf.data.Dataset` keeps its batches as global ones: each rank keeps its
    slice of each (every rank reads the whole dataset, in the same order: shuffle it with a
    seed); one already split per rank (a `shard` in it, or `rt.dataset`) is left as it is. Every
    rank takes the same steps (else a rank would wait in the others' all-reduce): the last
    partial batch is cut to a multiple of N samples (at most N - 1 dropped an epoch, said once).
  - validation_data, and validation_split's part, are split the same way (`validation_batch_size`
    global too): every rank evaluates its part and Horovod's metric averaging (the engine's
    callbacks) makes val_* the whole set's on every rank. Evaluating on the chief alone would
    leave the other ranks out of the averaging of val_* at the epoch's end.
  - the engine's callbacks (the first weights broadcast from rank 0, metrics averaged) put first
    in the list where it holds none of their kinds (tfdist.train.auto_callbacks adds them with
    rt.callbacks(); a script's own are kept); Horovod's callbacks in the list of the model's
    Keras (a tf_keras model without TF_USE_LEGACY_KERAS=1: horovod_binding.callbacks_for_model).
  - an input tfdist cannot split (a generator, a PyDataset or Sequence, an iterator) is a
    ConfigError naming what to pass instead; a model whose optimizer no rank averages (compiled
    before tfdist.init()) is refused: it would train one copy per rank.
`evaluate` and `predict` are left as they are: every rank computes the whole result.
"""

from __future__ import annotations

import logging

from tfdist.distribute import default_strategy, rank_split
from tfdist.errors import ConfigError
from tfdist.keras_compat import adapter, user_fit
from tfdist.keras_compat.horovod_binding import callbacks_for_model, is_distributed_optimizer

log = logging.getLogger("tfdist")

KERAS_BATCH = 32  # fit's batch_size when the script gives none (both Kerases)
_OURS = "_tfdist_horovod_fit"  # set on the optimizers the compile hook wrapped
_state: dict = {}


class HorovodFitError(ConfigError):
    """A `fit` that tfdist cannot make Horovod's by itself; the message says what to write."""


def install(engine) -> None:
    """From now on every `compile` and `fit` of the script is Horovod's (the module's
    docstring) where `engine` is a HorovodEngine; another engine's: no hooks."""
    if engine.name != "horovod":
        uninstall()
        return
    _state.clear()
    _state.update(engine=engine, said=set())
    user_fit.on("compile", __name__, _compile)
    user_fit.on("fit", __name__, _fit)


def uninstall() -> None:
    _state.clear()
    user_fit.off("compile", __name__)
    user_fit.off("fit", __name__)


def _say_once(key: str, message: str, *args) -> None:
    if key not in _state["said"]:
        _state["said"].add(key)
        log.info(message, *args)


# ---------------------------------------------------------------------------------------------
# compile


def _compile(call: user_fit.Call) -> None:
    if not _state or default_strategy.is_outside():
        return
    given = call.get("optimizer", "rmsprop")  # compile's default in both Kerases
    if is_distributed_optimizer(given):
        if not getattr(given, _OURS, False):
            _say_once(
                "own", "Horovod: the script's optimizer is distributed already "
                "(hvd.DistributedOptimizer or rt.optimizer): left as it is, and so is the "
                "data of its fit (the script splits it per rank).")
        return
    optimizer = adapter(call.model).optimizer(given)
    wrapped = _state["engine"].wrap_optimizer(optimizer)
    setattr(wrapped, _OURS, True)
    call.arguments["optimizer"] = wrapped
    _say_once(
        "wrapped", "Horovod: %s wrapped in Horovod's DistributedOptimizer at compile "
        "(gradients averaged over the %d ranks).",
        type(optimizer).__name__, _state["engine"].world_size)


def _ours(optimizer) -> bool:
    while optimizer is not None:
        if getattr(optimizer, _OURS, False):
            return True
        optimizer = getattr(optimizer, "inner_optimizer", None)  # a LossScaleOptimizer's
    return False


# ---------------------------------------------------------------------------------------------
# fit


def _fit(call: user_fit.Call) -> None:
    if not _state or default_strategy.is_outside():
        return
    engine = _state["engine"]
    optimizer = getattr(call.model, "optimizer", None)
    if optimizer is not None and not is_distributed_optimizer(optimizer):
        raise HorovodFitError(
            f"{type(call.model).__name__}'s optimizer ({type(optimizer).__name__}) averages "
            "nothing over Horovod's ranks: the model was compiled before tfdist.init(), and its "
            "fit would train one independent copy per rank. Fix: compile the model after "
            "`tfdist.init()` (its compile then wraps the optimizer), or wrap it yourself: "
            "`model.compile(optimizer=rt.optimizer(optimizer), ...)`.")
    _add_engine_callbacks(call, engine)
    if call.get("callbacks") is not None:  # Horovod's, of the model's Keras
        call.arguments["callbacks"] = callbacks_for_model(call.arguments["callbacks"], call.model)
    if not _ours(optimizer) or engine.world_size < 2:
        return  # the script's own Horovod lines: its data is split as it wrote it
    x = call.get("x")
    if rank_split.is_taken(x):
        return  # this call was made Horovod's already (a hook must be idempotent)
    size, rank = engine.world_size, engine.rank
    given = call.get("batch_size")  # global; a dataset's batches are, and Keras ignores it
    if _is_dataset(x):
        _split_dataset(call, "x", size, rank)
    elif _is_arrays(x):
        batch = _per_rank_batch(given, size, "batch_size")
        _split_arrays(call, batch, size, rank)
        call.arguments["batch_size"] = batch // size
    else:
        raise _cannot_split(x, "x")
    _split_validation(call, given, size, rank)


def _per_rank_batch(value, size: int, name: str) -> int:
    """The global batch `value` (None: Keras's default), checked divisible by `size`."""
    batch = KERAS_BATCH if value is None else int(value)
    if batch % size:
        raise HorovodFitError(
            f"fit({name}={batch}) with {size} Horovod ranks: {name} is the global batch, split "
            f"evenly over the ranks, and {batch} is not a multiple of {size}. Fix: pass a "
            f"multiple of {size}, e.g. {name}={batch // size * size or size}.")
    return batch


def _is_dataset(x) -> bool:
    import tensorflow as tf

    return isinstance(x, tf.data.Dataset)


def _is_arrays(x) -> bool:
    import tensorflow as tf

    if isinstance(x, (str, bytes)) or x is None:
        return False
    leaves = tf.nest.flatten(x)
    return bool(leaves) and all(
        hasattr(leaf, "__array__") and hasattr(leaf, "shape") and len(leaf.shape) > 0
        for leaf in leaves)


def _cannot_split(x, name: str) -> HorovodFitError:
    return HorovodFitError(
        f"fit({name}=<{type(x).__name__}>) under Horovod: tfdist splits NumPy arrays and "
        "tf.data datasets per rank, not this input, and every rank would train on all of it. "
        "Fix: pass NumPy arrays or a batched tf.data.Dataset (a generator: "
        "`tf.data.Dataset.from_generator(gen, output_signature=...)`, the same batches in the "
        "same order on every rank), or make the input yield this rank's own batches "
        "(`rt.rank` of `rt.world_size`) and compile with `rt.optimizer(optimizer)`, which tells "
        "tfdist that the script splits its data itself.")


def _split_arrays(call: user_fit.Call, batch: int, size: int, rank: int) -> None:
    names = [n for n in ("x", "y", "sample_weight") if call.get(n) is not None]
    data = {n: call.arguments[n] for n in names}
    fraction = call.get("validation_split") or 0.0
    if fraction and call.get("validation_data") is None:
        n = _rows(data["x"])
        split_at = int(n * (1.0 - fraction))  # Keras's: the last fraction, before shuffling
        if 0 < split_at < n:
            head, tail = slice(0, split_at), slice(split_at, n)
            validation = tuple(rank_split.take(data[k], tail) for k in names)
            data = {k: rank_split.take(data[k], head) for k in names}
            call.arguments["validation_data"] = validation
            call.arguments["validation_split"] = 0.0
    n = _rows(data["x"])
    for k in names:
        call.arguments[k] = rank_split.take(data[k], rank_split.array_indices(n, batch, size, rank))
    _say_dropped("train", n, batch, size)


def _say_dropped(what: str, n: int, batch: int, size: int) -> None:
    lost = rank_split.dropped(n, batch, size)
    _say_once(
        f"split {what}", "Horovod: the %s data split over %d ranks, %d samples each an epoch "
        "in batches of %d (the global batch %d)%s.", what, size, (n - lost) // size, batch // size,
        batch, f"; its last {lost} samples dropped (the last batch cut to a "
        f"multiple of {size}, so that every rank takes the same steps)" if lost else "")


def _rows(structure) -> int:
    import tensorflow as tf

    return int(tf.nest.flatten(structure)[0].shape[0])


def _split_dataset(call: user_fit.Call, name: str, size: int, rank: int) -> None:
    dataset = call.arguments[name]
    if rank_split.is_split(dataset):
        _say_once(
            f"own {name}", "Horovod: fit's %s is split per rank already (a shard in its "
            "pipeline, or rt.dataset): each rank trains its batches as they are.", name)
        return
    call.arguments[name] = rank_split.split_batches(dataset, size, rank)
    _say_once(
        f"split {name}", "Horovod: fit's %s dataset split over %d ranks: each takes its 1/%d of "
        "every batch (the batch is the global one); batches of fewer than %d samples dropped, "
        "the rest of the division dropped too. Every rank reads the whole dataset: it must give "
        "the same batches in the same order on every rank (shuffle with a seed).", name, size, size,
        size)


def _split_validation(call: user_fit.Call, batch, size: int, rank: int) -> None:
    """validation_data split per rank; arrays in batches of `validation_batch_size`, else of fit's
    `batch` (both global; None: Keras's default)."""
    validation = call.get("validation_data")
    if validation is None:
        return
    if _is_dataset(validation):
        _split_dataset(call, "validation_data", size, rank)
        return
    if not isinstance(validation,
                      (tuple, list)) or not all(v is None or _is_arrays(v) for v in validation):
        raise _cannot_split(validation, "validation_data")
    given = call.get("validation_batch_size")
    vbatch = (_per_rank_batch(batch, size, "batch_size") if given is None else _per_rank_batch(
        given, size, "validation_batch_size"))
    n = _rows(validation[0])
    indices = rank_split.array_indices(n, vbatch, size, rank)
    call.arguments["validation_data"] = tuple(rank_split.take(v, indices) for v in validation)
    call.arguments["validation_batch_size"] = vbatch // size
    _say_dropped("validation", n, vbatch, size)


def _add_engine_callbacks(call: user_fit.Call, engine) -> None:
    """The engine's callbacks (broadcast, metric averaging) first in the list, each of whose kind
    the list (nested lists such as rt.callbacks()' included) holds none."""
    given = call.get("callbacks")
    listed = [] if given is None else list(given) if isinstance(given, (list, tuple)) else [given]
    present = {type(c).__name__ for c in user_fit.callbacks_in(listed)}
    missing = [c for c in engine.callbacks() if type(c).__name__ not in present]
    if missing:
        call.arguments["callbacks"] = missing + listed
