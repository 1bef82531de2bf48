"""The sharding plan, said out loud once."""

import pytest

from tests.helpers import tfdist_log
from tfdist.data import build_dataset, make_input_context, plan_shards, TFRecordSource
from tfdist.data.build import dataset_options

import tensorflow as tf


@pytest.mark.parametrize(
    "counts,num,batch,by,records,dropped",
    [
        ([10] * 8, 4, 5, "file", 20, 0),  # 2 files each
        ([10] * 8, 3, 5, "record", 25, 5),  # 3/3/2 files is too uneven
        ([10] * 8, 8, 5, "file", 10, 0),
        ([10] * 2, 4, 5, "record", 5, 0),  # fewer files than pipelines
        ([30, 31, 29, 30], 2, 4, "file", 56, 8),  # 59 and 61 records: even enough
        ([50, 10, 10, 10], 2, 4, "record", 40, 0),  # 60 vs 20 records
        ([103], 1, 4, "file", 100, 3),
    ])
def test_plan(counts, num, batch, by, records, dropped):
    files = [f"f{i}" for i in range(len(counts))]
    plan = plan_shards(files, counts, num, 0, batch)
    assert (plan.by, plan.records, plan.dropped) == (by, records, dropped)
    assert plan.dropped <= num * batch - 1 or by == "file"


def test_plan_in_plain_words():
    files = [f"/data/train-{i}.tfrecord" for i in range(8)]
    text = plan_shards(files, [100] * 8, 4, 1, 32).describe()
    assert text == ("8 files (800 records) over 4 input pipelines: 2 files each, by file; "
                    "pipeline 1 reads train-1.tfrecord, train-5.tfrecord and yields 192 records "
                    "per epoch; 32 records per epoch left out so every pipeline has the same "
                    "number of full batches.")
    text = plan_shards(files[:2], [100] * 2, 4, 3, 8).describe()
    assert text.startswith("2 files (200 records) over 4 input pipelines: fewer files than "
                           "pipelines, so by record: every pipeline reads all files and keeps "
                           "every 4th record; pipeline 3 yields 48 records per epoch; 8 records")


def test_plan_logged_once(one_file_tfrecord, caplog, monkeypatch):
    from tfdist.data import sharding

    monkeypatch.setattr(sharding, "_logged", set())  # earlier tests may have logged this plan
    with tfdist_log(caplog):
        for _ in range(3):
            build_dataset(TFRecordSource.from_folder(one_file_tfrecord, "train"),
                          make_input_context(3, 2, 3), 5)
    lines = [r.getMessage() for r in caplog.records if "input pipelines" in r.getMessage()]
    assert lines == [
        "1 file (103 records) over 3 input pipelines: fewer files than "
        "pipelines, so by record: every pipeline reads all files and keeps every 3rd"
        " record; pipeline 2 yields 30 records per epoch; 13 records per epoch left "
        "out so every pipeline has the same number of full batches."
    ]


def test_auto_sharding_is_off_and_order_deterministic(one_file_tfrecord):
    ds = build_dataset(TFRecordSource.from_folder(one_file_tfrecord, "train"),
                       make_input_context(2, 0, 2), 4)
    options = ds.options()
    assert options.experimental_distribute.auto_shard_policy == \
        tf.data.experimental.AutoShardPolicy.OFF
    assert options.deterministic is True
    assert dataset_options().threading.max_intra_op_parallelism == 1
    # tf.data's autotuning model off unless asked for (BuildOptions.autotune)
    assert options.autotune.enabled is False
    asked = build_dataset(TFRecordSource.from_folder(one_file_tfrecord, "train"),
                          make_input_context(2, 0, 2),
                          4,
                          autotune=True)
    assert asked.options().autotune.enabled is True


def test_input_context_validation():
    from tfdist.data import DataError

    with pytest.raises(DataError, match="input_pipeline_id=2: expected 0 to 1"):
        make_input_context(2, 2, 2)
