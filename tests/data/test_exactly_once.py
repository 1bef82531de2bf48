"""Every sample exactly once per epoch, for 1-4 input pipelines, by file and by record, for
TFRecord, HDF5 and TFDS sources."""

import pytest

from tests.data import helpers
from tfdist.data import plan_shards

BATCH = 4
KINDS = ["tfrecord", "hdf5", "tfds"]
FIXTURES = {
    ("tfrecord", "file"): "even_tfrecord",
    ("tfrecord", "record"): "one_file_tfrecord",
    ("hdf5", "file"): "even_hdf5",
    ("hdf5", "record"): "one_file_hdf5",
    ("tfds", "file"): "tfds_12_shards",
    ("tfds", "record"): "tfds_1_shard"
}

# drop_remainder=False (evaluation): every sample, partial last batches; on 3 pipelines.
CASES = [(kind, num, mode, True) for kind in KINDS for num in (1, 2, 3, 4)
         for mode in ("file", "record")] + [(kind, 3, mode, False) for kind in KINDS
                                            for mode in ("file", "record")]


@pytest.mark.parametrize("kind,num,mode,drop_remainder", CASES)
def test_union_is_the_data_set_each_sample_once(request, kind, num, mode, drop_remainder):
    where = request.getfixturevalue(FIXTURES[kind, mode])
    src = helpers.source(kind, where)
    total = sum(src.counts)
    plan = plan_shards(src.files, src.counts, num, 0, BATCH, drop_remainder=drop_remainder)
    if num > 1:
        assert plan.by == mode, plan.describe()

    per_pipeline = helpers.all_pipelines(lambda: helpers.source(kind, where),
                                         num,
                                         BATCH,
                                         seed=3,
                                         drop_remainder=drop_remainder)
    seen = [i for batches in per_pipeline for i in helpers.flat(batches)]
    assert len(seen) == len(set(seen)), "a sample reached two pipelines or came twice"
    assert set(seen) <= set(range(total))
    if drop_remainder:
        assert total - len(seen) == plan.dropped <= num * BATCH - 1
        assert len({len(batches) for batches in per_pipeline}) == 1, "unequal batch counts"
        assert all(len(b) == BATCH for batches in per_pipeline for b in batches)
    else:
        assert sorted(seen) == list(range(total))


@pytest.mark.parametrize("drop_remainder", [True, False])
def test_numpy_arrays_and_the_batch_count(drop_remainder):
    import numpy as np

    from tfdist.data import ArraySource, build_dataset, make_input_context

    ids = np.arange(50)
    seen = []
    for pid in range(3):
        ds = build_dataset(ArraySource({
            "id": ids,
            "x": ids * 2.0
        }),
                           make_input_context(3, pid, 3),
                           4,
                           seed=1,
                           drop_remainder=drop_remainder,
                           map_fn=lambda s, _: (s["id"], s["x"]))
        batches = list(ds.as_numpy_iterator())
        assert all(np.array_equal(x, i * 2.0) for i, x in batches)
        mine = len(range(pid, 50, 3))  # 17, 17, 16
        assert int(ds.cardinality()) == len(batches) == (4 if drop_remainder else -(-mine // 4))
        seen += [int(i) for b, _ in batches for i in b]
    assert len(seen) == len(set(seen))
    assert len(seen) == (48 if drop_remainder else 50)


@pytest.mark.parametrize("kind", ["tfrecord", "hdf5"])
def test_endless_pipelines_say_so(kind, even_tfrecord, even_hdf5):
    # An iterator of unknown length costs MultiWorkerMirroredStrategy an all-reduce per step (do
    # all workers still have data?); an endless pipeline must report infinite cardinality.
    import tensorflow as tf

    from tfdist.data import build_dataset, make_input_context

    folder = even_tfrecord if kind == "tfrecord" else even_hdf5
    ds = build_dataset(helpers.source(kind, folder), make_input_context(2, 0, 2), 4, repeat=True)
    assert int(ds.cardinality()) == int(tf.data.INFINITE_CARDINALITY)
