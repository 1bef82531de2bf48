"""Shuffle order: a pure function of (seed, epoch), the same on every worker before sharding."""

import tfdist.data as td
from tests.data import helpers

BATCH = 4


def _ids(where, num=1, pid=0, **kwargs):
    return helpers.flat(helpers.ids_of(helpers.source("tfrecord", where), num, pid, BATCH,
                                       **kwargs))


def test_same_seed_same_order_other_seed_other_order(even_tfrecord):
    first = _ids(even_tfrecord, seed=5)
    assert first == _ids(even_tfrecord, seed=5)
    assert first != _ids(even_tfrecord, seed=6)
    assert first != sorted(first), "not shuffled"


def test_new_epoch_new_order_same_samples(even_tfrecord):
    epoch0 = _ids(even_tfrecord, seed=5, epoch=0)
    epoch1 = _ids(even_tfrecord, seed=5, epoch=1)
    assert epoch0 != epoch1
    assert sorted(epoch0) == sorted(epoch1) == list(range(120))


def test_repeat_resumed_at_epoch_k_sees_what_the_full_run_saw(one_file_tfrecord):
    steps = 103 // (2 * BATCH)  # by record over 2 pipelines: 12 batches per epoch
    for pid in range(2):
        src = helpers.source("tfrecord", one_file_tfrecord)
        ds = td.build_dataset(src,
                              td.make_input_context(2, pid, 2),
                              BATCH,
                              seed=9,
                              repeat=True,
                              map_fn=lambda s, _: s["id"])
        full = [b.tolist() for b in ds.take(3 * steps).as_numpy_iterator()]
        resumed = td.build_dataset(helpers.source("tfrecord", one_file_tfrecord),
                                   td.make_input_context(2, pid, 2),
                                   BATCH,
                                   seed=9,
                                   repeat=True,
                                   epoch=2,
                                   map_fn=lambda s, _: s["id"])
        assert [b.tolist() for b in resumed.take(steps).as_numpy_iterator()] == full[2 * steps:]
        one_epoch = helpers.ids_of(helpers.source("tfrecord", one_file_tfrecord),
                                   2,
                                   pid,
                                   BATCH,
                                   seed=9,
                                   epoch=1)
        assert one_epoch == full[steps:2 * steps]


def test_repeat_every_epoch_splits_the_data_between_workers(even_tfrecord):
    steps = 120 // (3 * BATCH)
    per_worker = []
    for pid in range(3):
        ds = td.build_dataset(helpers.source("tfrecord", even_tfrecord),
                              td.make_input_context(3, pid, 3),
                              BATCH,
                              seed=1,
                              repeat=True,
                              map_fn=lambda s, _: s["id"])
        per_worker.append([b.tolist() for b in ds.take(3 * steps).as_numpy_iterator()])
    orders = []
    for e in range(3):
        epoch = [i for w in per_worker for i in helpers.flat(w[e * steps:(e + 1) * steps])]
        assert sorted(epoch) == list(range(120)), f"epoch {e}"
        orders.append(helpers.flat(per_worker[0][e * steps:(e + 1) * steps]))
    assert orders[0] != orders[1] != orders[2]


def test_no_shuffle_by_record_pipeline_i_gets_records_i_plus_kN(one_file_tfrecord):
    for pid in range(3):
        got = _ids(one_file_tfrecord, 3, pid, shuffle=False, drop_remainder=False)
        assert got == list(range(pid, 103, 3))


def test_no_shuffle_n_workers_see_the_global_batches_of_one_worker(one_file_tfrecord):
    one = helpers.ids_of(helpers.source("tfrecord", one_file_tfrecord),
                         1,
                         0,
                         4 * BATCH,
                         shuffle=False)
    workers = [
        helpers.ids_of(helpers.source("tfrecord", one_file_tfrecord), 4, pid, BATCH, shuffle=False)
        for pid in range(4)
    ]
    assert all(len(w) == len(one) for w in workers)
    for k, global_batch in enumerate(one):
        assert sorted(i for w in workers for i in w[k]) == sorted(global_batch)


def test_hdf5_order_follows_the_same_rules(even_hdf5):

    def ids(**kwargs):
        return helpers.flat(helpers.ids_of(helpers.source("hdf5", even_hdf5), 2, 1, BATCH,
                                           **kwargs))

    assert ids(seed=2) == ids(seed=2) != ids(seed=2, epoch=1)
    assert ids(shuffle=False, shard_by="record") == list(range(1, 120, 2))


def test_a_global_seed_does_not_change_the_order(even_tfrecord):
    import tensorflow as tf

    before = _ids(even_tfrecord, seed=5, epoch=2)
    tf.random.set_seed(1234)  # what Keras users often do at the top of a script
    try:
        assert _ids(even_tfrecord, seed=5, epoch=2) == before
    finally:
        tf.random.set_seed(None)
