"""Bad data stops with an error that names the file or value and says what to change."""

import os
import shutil

import pytest

import tfdist  # noqa: F401
import tensorflow as tf

from tests.data import helpers
from pipelines import load_pipeline
from tfdist.data import DataError, HDF5Source, TFDSSource, TFRecordSource, skipped_records


@pytest.fixture
def copy_of(tmp_path, even_tfrecord):
    folder = str(tmp_path / "copy")
    shutil.copytree(even_tfrecord, folder)
    return folder


def _flip_a_byte(path):
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(path, "wb").write(bytes(data))


def test_truncated_shard_is_named_before_training(copy_of):
    shard = os.path.join(copy_of, "train-00003-of-00012.tfrecord")
    data = open(shard, "rb").read()
    open(shard, "wb").write(data[:len(data) // 2])
    with pytest.raises(DataError,
                       match=r"train-00003-of-00012.tfrecord is \d+ bytes but its "
                       r"manifest says \d+: the shard was truncated"):
        TFRecordSource.from_folder(copy_of, "train")


def test_corrupt_record_stops_with_the_file_name(copy_of):
    _flip_a_byte(os.path.join(copy_of, "train-00005-of-00012.tfrecord"))
    src = TFRecordSource.from_folder(copy_of, "train")
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"train-00005-of-00012.tfrecord\\?\" yielded \d records, its "
                       r"manifest lists 10: a corrupt record.*skip_corrupt=True"):
        helpers.ids_of(src, 1, 0, 4, shuffle=False)


def test_corrupt_record_skipped_on_request_and_counted(copy_of, caplog):
    path = os.path.join(copy_of, "train-00005-of-00012.tfrecord")
    _flip_a_byte(path)
    src = TFRecordSource.from_folder(copy_of, "train", skip_corrupt=True)
    with caplog.at_level("WARNING"):
        seen = helpers.flat(helpers.ids_of(src, 1, 0, 4, shuffle=False, drop_remainder=False))
    lost = skipped_records()[path]
    assert 1 <= lost <= 10 and len(seen) == 120 - lost
    assert set(seen) >= set(range(50)) | set(range(60, 120))
    assert f"skipped {lost} corrupt or unreadable records of 10 in {path}" in caplog.text


def test_corrupt_record_in_a_file_without_manifest_is_named(copy_of):
    path = os.path.join(copy_of, "train-00002-of-00012.tfrecord")
    _flip_a_byte(path)
    with pytest.raises(DataError, match=f"{path}: corrupt record while counting"):
        TFRecordSource([path])


def test_missing_hdf5_dataset_lists_the_ones_there(tmp_path):
    paths = helpers.write_uneven_hdf5(str(tmp_path), [5, 7])
    with pytest.raises(DataError, match=r"part-0.h5 has no dataset 'label'; it has \['id', 'x'\]"):
        HDF5Source(paths, ["x", "label"])


def test_hdf5_shorter_than_its_manifest_is_named(tmp_path, even_hdf5):
    import h5py

    folder = str(tmp_path / "h5")
    shutil.copytree(even_hdf5, folder)
    shard = os.path.join(folder, "train-00001-of-00012.h5")
    with h5py.File(shard, "r") as f:
        rows = {k: f[k][:6] for k in f}
    with h5py.File(shard, "w") as f:
        for k, v in rows.items():
            f[k] = v
    manifest_bytes = os.path.getsize(shard)
    import json

    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    manifest["splits"]["train"]["shards"][1]["bytes"] = manifest_bytes  # same size, fewer rows
    json.dump(manifest, open(os.path.join(folder, "manifest.json"), "w"))
    with pytest.raises(DataError,
                       match="train-00001-of-00012.h5 has 6 rows but its manifest "
                       "lists 10"):
        HDF5Source.from_folder(folder, "train", ["id", "x"])


def test_missing_tfds_data_dir(tmp_path):
    missing = str(tmp_path / "nowhere")
    with pytest.raises(DataError, match=f"TFDS data_dir='{missing}' does not exist.*tfds build"):
        TFDSSource("tiny_ids", "train", missing)


def test_tfds_data_set_not_prepared_in_data_dir(tmp_path):
    with pytest.raises(DataError, match=f"'tiny_ids' is not prepared in {tmp_path}"):
        TFDSSource("tiny_ids", "train", str(tmp_path))


def test_fewer_records_than_workers(tmp_path):
    folder = helpers.write_ids(str(tmp_path / "three"), 3, 1)
    src = TFRecordSource.from_folder(folder, "train")
    with pytest.raises(DataError,
                       match=r"train-00000-of-00001.tfrecord holds 3 records but there "
                       r"are 4 input pipelines \(workers\): some would get no data"):
        helpers.ids_of(src, 4, 0, 1)


def test_no_full_batch(tmp_path):
    folder = helpers.write_ids(str(tmp_path / "ten"), 10, 1)
    with pytest.raises(DataError,
                       match="10 records over 2 input pipelines leave no full batch of "
                       "batch_size=8"):
        helpers.ids_of(TFRecordSource.from_folder(folder, "train"), 2, 0, 8)


def test_shard_by_file_needs_a_file_per_pipeline(even_tfrecord):
    with pytest.raises(DataError, match="shard_by='file' with 12 files and 16 input pipelines"):
        helpers.ids_of(helpers.source("tfrecord", even_tfrecord), 16, 0, 1, shard_by="file")


def test_folder_without_manifest(tmp_path):
    with pytest.raises(DataError, match="manifest.json does not exist.*tfdist convert"):
        TFRecordSource.from_folder(str(tmp_path), "train")


def test_unknown_split(even_tfrecord):
    with pytest.raises(DataError, match=r"has no split 'validation'; it has \['train'\]"):
        TFRecordSource.from_folder(even_tfrecord, "validation")


def test_unknown_pipeline_and_incomplete_pipeline_file(tmp_path):
    with pytest.raises(DataError, match="pipeline 'mnist' is not a bundled pipeline \\(digits, "):
        load_pipeline("mnist")
    user = tmp_path / "mine.py"
    user.write_text("def info(data_dir=None):\n    return {}\n")
    with pytest.raises(DataError, match="defines no dataset\\(\\)"):
        load_pipeline(str(user))
