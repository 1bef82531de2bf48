import pytest

from tests.data import helpers


@pytest.fixture(scope="session")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="session")
def even_tfrecord(data_root):
    """12 TFRecord shards of 10 records: ids 0..119."""
    return helpers.write_ids(str(data_root / "even_tfrecord"), 120, 12)


@pytest.fixture(scope="session")
def even_hdf5(data_root):
    return helpers.write_ids(str(data_root / "even_hdf5"), 120, 12, format="hdf5")


@pytest.fixture(scope="session")
def one_file_tfrecord(data_root):
    """103 records in one shard: sharded by record for 2 or more pipelines."""
    return helpers.write_ids(str(data_root / "one_file_tfrecord"), 103, 1)


@pytest.fixture(scope="session")
def one_file_hdf5(data_root):
    return helpers.write_ids(str(data_root / "one_file_hdf5"), 103, 1, format="hdf5")


@pytest.fixture(scope="session")
def tfds_12_shards(data_root):
    return helpers.build_tiny_tfds(str(data_root / "tfds12"), 12)


@pytest.fixture(scope="session")
def tfds_1_shard(data_root):
    return helpers.build_tiny_tfds(str(data_root / "tfds1"), 1)
