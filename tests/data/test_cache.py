"""Cache: the same epochs from memory or from a node-local file, and one pass over the files."""

import glob

import pytest

from tests.data import helpers


def _epochs(where, **kwargs):
    import tfdist.data as td

    source = where if hasattr(where, "parse") else helpers.source("tfrecord", where)
    ds = td.build_dataset(source,
                          td.make_input_context(2, 1, 2),
                          4,
                          seed=4,
                          repeat=True,
                          map_fn=lambda s, _: s["id"],
                          **kwargs)
    steps = 120 // 8
    batches = [b.tolist() for b in ds.take(2 * steps).as_numpy_iterator()]
    return [helpers.flat(batches[:steps]), helpers.flat(batches[steps:])]


def test_cached_epochs_keep_the_split_and_reshuffle(even_tfrecord, tmp_path):
    plain = _epochs(even_tfrecord)
    memory = _epochs(even_tfrecord, cache="memory")
    disk = _epochs(even_tfrecord, cache=str(tmp_path))
    for epochs in (memory, disk):
        # Pipeline 1 of 2 by file reads files 1, 3, 5, ...: ids 10-19, 30-39, ...
        mine = sorted(i for i in range(120) if (i // 10) % 2 == 1)
        assert sorted(epochs[0]) == sorted(epochs[1]) == sorted(plain[0]) == mine
        assert epochs[0] != epochs[1]
    assert memory == disk
    assert glob.glob(str(tmp_path / "tfdist-cache-*.index")), "no cache file written"


def test_cache_is_read_once_even_when_batches_are_cut(tmp_path):
    # 103 records over 2 pipelines of batch 4 keep 96: the cache must still be read to its end.
    folder = helpers.write_ids(str(tmp_path / "data"), 103, 1)
    import tfdist.data as td

    ds = td.build_dataset(helpers.source("tfrecord", folder),
                          td.make_input_context(2, 0, 2),
                          4,
                          seed=1,
                          repeat=True,
                          cache=str(tmp_path),
                          map_fn=lambda s, _: s["id"])
    first = [b.tolist() for b in ds.take(24).as_numpy_iterator()]
    assert len(set(helpers.flat(first[:12]))) == 48 and first[:12] != first[12:]
    assert glob.glob(str(tmp_path / "tfdist-cache-*.index"))


def _counted(source):
    """The source, with a Python call per parsed record appended to the returned list."""
    import tensorflow as tf

    calls, parse = [], source.parse

    def counted(record):
        tick = tf.py_function(lambda: calls.append(1) or 0, [], tf.int32)
        with tf.control_dependencies([tick]):
            return tf.nest.map_structure(tf.identity, parse(record))

    source.parse = counted
    return source, calls


def test_cache_parsed_replays_parsed_samples(even_tfrecord, even_hdf5):
    import tfdist.data as td

    source, calls = _counted(helpers.source("tfrecord", even_tfrecord))
    replayed = _epochs(source, cache="memory", cache_parsed=True)
    assert len(calls) == 60, "parse ran again after the first pass"
    # Same samples in the same order as a cache of unparsed records.
    assert replayed == _epochs(even_tfrecord, cache="memory")

    with pytest.raises(td.DataError, match="leave cache_parsed off"):
        td.build_dataset(helpers.source("hdf5", even_hdf5),
                         None,
                         4,
                         cache="memory",
                         cache_parsed=True)


@pytest.mark.parametrize("shuffle", [True, False])
def test_cache_parsed_without_map_reads_once_when_batches_are_cut(tmp_path, shuffle):
    # 103 records over 2 pipelines of batch 4 keep 96; no map_fn: batches straight from the cache.
    import tfdist.data as td

    folder = helpers.write_ids(str(tmp_path / "data"), 103, 1)

    def batches(source, **kwargs):
        ds = td.build_dataset(source,
                              td.make_input_context(2, 0, 2),
                              4,
                              seed=1,
                              shuffle=shuffle,
                              repeat=True,
                              cache="memory",
                              **kwargs)
        return [b["id"].tolist() for b in ds.take(36).as_numpy_iterator()]

    source, calls = _counted(helpers.source("tfrecord", folder))
    parsed = batches(source, cache_parsed=True)
    assert len(calls) == 103, "the cache was not complete after the first pass"
    assert parsed == batches(helpers.source("tfrecord", folder))
    epochs = [helpers.flat(parsed[k:k + 12]) for k in (0, 12, 24)]
    assert all(len(e) == 48 and len(set(e)) == 48 for e in epochs)
    assert (epochs[0] != epochs[1]) == shuffle
