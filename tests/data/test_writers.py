"""Shards and manifest: counts, sizes, checksums, no-op re-runs, atomic publication."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.data import helpers
from tfdist.data import DataError, read_manifest, write_shards
from tfdist.data.manifest import sha256


def test_manifest_lists_every_shard(tmp_path):
    folder = helpers.write_ids(str(tmp_path / "out"), 25, 4)
    manifest = read_manifest(folder)
    shards = manifest["splits"]["train"]["shards"]
    assert [s["records"] for s in shards] == [6, 6, 6, 7]
    assert manifest["splits"]["train"]["records"] == 25
    for s in shards:
        path = os.path.join(folder, s["file"])
        assert s["bytes"] == os.path.getsize(path) and s["sha256"] == sha256(path)
    assert manifest["features"] == {
        "id": {
            "kind": "int",
            "dtype": "int64",
            "shape": []
        },
        "x": {
            "kind": "float",
            "dtype": "float32",
            "shape": [3]
        }
    }
    assert sorted(os.listdir(tmp_path)) == ["out"], "a temporary folder was left behind"


def test_same_inputs_again_is_a_no_op(tmp_path):
    folder = helpers.write_ids(str(tmp_path / "out"), 25, 4)
    before = os.stat(os.path.join(folder, "manifest.json")).st_mtime_ns
    manifest, written = write_shards(folder, {"train": (25, helpers.samples(25))},
                                     fingerprint="25-4-tfrecord",
                                     num_shards=4)
    assert not written
    assert os.stat(os.path.join(folder, "manifest.json")).st_mtime_ns == before


def test_other_inputs_need_overwrite(tmp_path):
    folder = helpers.write_ids(str(tmp_path / "out"), 25, 4)
    with pytest.raises(DataError, match="already holds data packed from other inputs.*overwrite"):
        write_shards(folder, {"train": (5, helpers.samples(5))}, fingerprint="other")
    _, written = write_shards(folder, {"train": (5, helpers.samples(5))},
                              fingerprint="other",
                              overwrite=True)
    assert written and read_manifest(folder)["splits"]["train"]["records"] == 5
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_hdf5_shards_hold_the_arrays(tmp_path):
    import h5py

    folder = helpers.write_ids(str(tmp_path / "h5"), 10, 2, format="hdf5")
    with h5py.File(os.path.join(folder, "train-00001-of-00002.h5")) as f:
        assert f["id"][:].tolist() == [5, 6, 7, 8, 9]
        assert f["x"].shape == (5, 3)


def test_uint8_arrays_are_stored_as_raw_bytes_and_read_back(tmp_path):
    from tfdist.data import TFRecordSource

    images = np.arange(2 * 4 * 4, dtype=np.uint8).reshape(2, 4, 4)
    rows = ({"image": images[i], "flag": np.bool_(i)} for i in range(2))
    write_shards(str(tmp_path / "u8"), {"train": (2, rows)}, fingerprint="u8")
    src = TFRecordSource.from_folder(str(tmp_path / "u8"), "train")
    import tensorflow as tf

    got = list(tf.data.TFRecordDataset(src.files).map(src.parse).as_numpy_iterator())
    assert np.array_equal(got[1]["image"], images[1]) and got[1]["flag"] == np.True_


def test_source_shorter_than_announced(tmp_path):
    with pytest.raises(DataError, match="announced 10 samples but ran out after 4"):
        write_shards(str(tmp_path / "out"), {"train": (10, helpers.samples(4))}, fingerprint="x")
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_two_processes_packing_digits_at_once(tmp_path):
    code = ("import tfdist; import pipelines.digits as d; import sys; "
            "print(d.info(sys.argv[1])['num_train'])")
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path)],
                         stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE,
                         text=True,
                         env=env) for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    assert [out.split()[-1] for out, _ in outs] == ["1437", "1437"]
    assert os.listdir(tmp_path) == ["digits-v1"], "leftover temporary folders"
    manifest = json.load(open(tmp_path / "digits-v1" / "manifest.json"))
    assert manifest["splits"]["test"]["records"] == 360


def test_pack_a_tfds_split(tmp_path, tfds_1_shard):
    from tfdist.data.packers import pack_tfds

    manifest, written = pack_tfds("tiny_ids", tfds_1_shard, str(tmp_path / "out"), num_shards=3)
    assert written and manifest["splits"]["train"]["records"] == 120
    assert manifest["features"]["image"] == {"kind": "raw", "dtype": "uint8", "shape": [4, 4, 1]}
    ids = helpers.flat(
        helpers.ids_of(helpers.source("tfrecord", str(tmp_path / "out")), 1, 0, 8, shuffle=False))
    assert sorted(ids) == list(range(120))
    _, again = pack_tfds("tiny_ids", tfds_1_shard, str(tmp_path / "out"), num_shards=3)
    assert not again
