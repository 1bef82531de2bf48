"""tfdist.distribute.horovod_fit and rank_split in one process: each rank's part of every global
batch, and the fits that tfdist refuses under Horovod, with what to write instead."""

import numpy as np
import pytest
import tensorflow as tf

from tfdist.distribute import horovod_fit, rank_split
from tfdist.keras_compat import user_fit


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 150, 1350, 1351])
@pytest.mark.parametrize("size", [2, 4])
def test_array_indices_partition_the_global_batches(n, size):
    batch = 64
    parts = [rank_split.array_indices(n, batch, size, r) for r in range(size)]
    assert len({len(p) for p in parts}) == 1  # the same steps and samples on every rank
    taken = np.sort(np.concatenate(parts))
    np.testing.assert_array_equal(taken, np.arange(n - rank_split.dropped(n, batch, size)))
    assert rank_split.dropped(n, batch, size) < size
    per = batch // size
    for r, part in enumerate(parts):  # step k of rank r: the r-th slice of global batch k
        for k in range(n // batch):
            np.testing.assert_array_equal(part[k * per:(k + 1) * per],
                                          np.arange(k * batch + r * per, k * batch + (r + 1) * per))


def test_split_batches_takes_each_ranks_slice():
    batches = tf.data.Dataset.range(150).batch(64)  # 64, 64, 22
    got = [[b.numpy().tolist() for b in rank_split.split_batches(batches, 2, r)] for r in range(2)]
    assert got[0] == [list(range(0, 32)), list(range(64, 96)), list(range(128, 139))]
    assert got[1] == [list(range(32, 64)), list(range(96, 128)), list(range(139, 150))]
    # A last batch of fewer samples than ranks is dropped; one with a rest loses the rest.
    pairs = tf.data.Dataset.from_tensor_slices((np.arange(129), -np.arange(129))).batch(64)
    got = list(rank_split.split_batches(pairs, 2, 1))
    assert len(got) == 2 and got[1][1].numpy().tolist() == list(range(-96, -128, -1))
    assert [
        len(list(rank_split.split_batches(tf.data.Dataset.range(7).batch(7), 4, r)))
        for r in range(4)
    ] == [1] * 4


def test_is_split():
    data = tf.data.Dataset.range(8)
    assert rank_split.is_split(data.shard(2, 0).map(lambda v: v + 1).batch(2))
    assert not rank_split.is_split(data.map(lambda v: v + 1).batch(2))
    assert rank_split.is_split(rank_split.mark(data.batch(2)))


class _Distributed:
    """What Horovod's DistributedOptimizer makes of a tf-keras optimizer (the marks it copies)."""

    def _allreduce(self):
        pass

    def register_local_var(self, var):
        pass


class _Engine:
    name, world_size, rank = "horovod", 4, 1

    def callbacks(self):
        return []

    def wrap_optimizer(self, optimizer):
        return _Distributed()


class _Model:

    def __init__(self, optimizer):
        self.optimizer = optimizer


@pytest.fixture
def hooks():
    horovod_fit.install(_Engine())
    yield
    horovod_fit.uninstall()


def fit(model, **arguments):
    call = user_fit.Call(model, arguments)
    horovod_fit._fit(call)
    return call.arguments


def ours():
    optimizer = _Distributed()
    setattr(optimizer, horovod_fit._OURS, True)
    return optimizer


def test_batch_size_must_divide(hooks):
    x = np.zeros((100, 3))
    with pytest.raises(horovod_fit.HorovodFitError) as err:
        fit(_Model(ours()), x=x, y=x, batch_size=50)
    assert str(err.value) == (
        "fit(batch_size=50) with 4 Horovod ranks: batch_size is the global batch, split evenly "
        "over the ranks, and 50 is not a multiple of 4. Fix: pass a multiple of 4, e.g. "
        "batch_size=48.")
    assert fit(_Model(ours()), x=x, y=x)["batch_size"] == 8  # Keras's default: 32, global
    with pytest.raises(horovod_fit.HorovodFitError, match=r"fit\(validation_batch_size=6\)"):
        fit(_Model(ours()), x=x, y=x, batch_size=8, validation_data=(x, x), validation_batch_size=6)


def test_arrays_are_split_with_validation_split_first(hooks):
    x = np.arange(100)
    got = fit(_Model(ours()), x=x, y=-x, batch_size=8, validation_split=0.2)
    # 80 to train: 10 global batches, rank 1 takes the second quarter of each
    np.testing.assert_array_equal(got["x"], (np.arange(10)[:, None] * 8 + [2, 3]).ravel())
    np.testing.assert_array_equal(got["y"], -got["x"])
    assert got["batch_size"] == 2 and got["validation_split"] == 0.0
    vx, vy = got["validation_data"]
    np.testing.assert_array_equal(vx, [82, 83, 90, 91, 97])  # 20: 8, 8 and 4 (1 each)
    assert got["validation_batch_size"] == 2
    again = user_fit.Call(_Model(ours()), dict(got))
    horovod_fit._fit(again)  # idempotent: a call made Horovod's is left as it is
    assert again.arguments == got


def test_a_datasets_batches_are_the_global_ones(hooks):
    batches = tf.data.Dataset.range(8).batch(4)
    got = fit(_Model(ours()), x=batches, validation_data=batches)  # no batch_size: not used
    assert [b.numpy().tolist() for b in got["x"]] == [[1], [5]]  # rank 1 of 4
    assert [b.numpy().tolist() for b in got["validation_data"]] == [[1], [5]]
    again = fit(_Model(ours()), **got)
    assert again["x"] is got["x"] and again["validation_data"] is got["validation_data"]


def test_what_cannot_be_split_says_what_to_write(hooks):

    def batches():
        yield np.zeros((4, 3)), np.zeros((4, 1))

    with pytest.raises(horovod_fit.HorovodFitError) as err:
        fit(_Model(ours()), x=batches(), batch_size=8)
    assert str(err.value).startswith("fit(x=<generator>) under Horovod: tfdist splits NumPy "
                                     "arrays and tf.data datasets per rank, not this input")
    assert "tf.data.Dataset.from_generator(gen, output_signature=...)" in str(err.value)


def test_an_optimizer_that_averages_nothing_is_refused(hooks):
    with pytest.raises(horovod_fit.HorovodFitError, match="compiled before tfdist.init()"):
        fit(_Model(object()), x=np.zeros((8, 1)), batch_size=8)


def test_the_scripts_own_horovod_lines_are_left_as_written(hooks):
    x = np.arange(10)
    got = fit(_Model(_Distributed()), x=x, y=x, batch_size=8)  # not ours: the script's own
    assert got["x"] is x and got["batch_size"] == 8


def test_compile_wraps_once(hooks):
    call = user_fit.Call(_Model(None), {"optimizer": _Distributed()})
    given = call.arguments["optimizer"]
    horovod_fit._compile(call)
    assert call.arguments["optimizer"] is given  # distributed already: left as it is
