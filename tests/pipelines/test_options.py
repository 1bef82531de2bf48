"""--pipeline_option=key=value: parsed, checked against the recipe's signature, typed."""

import pytest

from pipelines import check_options, load_pipeline, parse_option_pairs, recipe_options
from tfdist.data import DataError


def test_pairs_are_split_at_the_first_equals_sign():
    assert parse_option_pairs(["name=mnist", "train_files=/d/a=1.h5", "x="]) == {
        "name": "mnist",
        "train_files": "/d/a=1.h5",
        "x": ""
    }
    with pytest.raises(DataError, match=r"--pipeline_option='mnist': expected key=value"):
        parse_option_pairs(["mnist"])


@pytest.mark.parametrize("name,expected", [
    ("tfds", {"name", "train_split", "test_split", "image_key", "label_key"}),
    ("image_folder", {"source", "image_size", "augment", "num_shards", "test_fraction"}),
    ("hdf5", {"x", "y", "train_files", "test_files", "num_classes"}),
    ("synthetic", {"shape", "num_classes", "num_train", "num_test"}),
    ("digits", {"shard_by", "cache"}),
])
def test_every_recipe_names_its_options(name, expected):
    options = set(recipe_options(load_pipeline(name)))
    assert expected <= options
    # dataset() passes the rest on to build_dataset: its tuning options are options too.
    assert {"shuffle_buffer", "cycle_length", "deterministic"} <= options
    assert not options & {"split", "batch_size", "seed", "data_dir", "map_fn"}


def test_values_take_the_type_of_the_default_or_the_annotation():
    image_folder = load_pipeline("image_folder")
    assert check_options(
        image_folder, "image_folder", {
            "source": "/data/img",
            "image_size": "16",
            "augment": "false",
            "test_fraction": "0.25",
            "cache": "memory"
        }) == {
            "source": "/data/img",
            "image_size": 16,
            "augment": False,
            "test_fraction": 0.25,
            "cache": "memory"
        }
    # num_classes: int | None = None -> int; a value that is no longer a string is kept.
    assert check_options(load_pipeline("hdf5"), "hdf5", {"num_classes": "5"}) == {"num_classes": 5}
    assert check_options(load_pipeline("synthetic"), "synthetic", {"num_train": 64}) == {
        "num_train": 64
    }


def test_an_unknown_option_names_the_recipe_and_lists_its_options():
    with pytest.raises(DataError) as e:
        check_options(load_pipeline("tfds"), "tfds", {"nmae": "mnist"})
    message = str(e.value)
    assert "--pipeline_option=nmae=mnist: the 'tfds' pipeline has no option 'nmae'" in message
    assert "Its options: " in message and "name, " in message and "pipelines/tfds.py" in message


def test_a_value_of_the_wrong_type_says_which():
    with pytest.raises(DataError, match=r"image_size=big: image_size takes a int \(default 64\)"):
        check_options(load_pipeline("image_folder"), "image_folder", {"image_size": "big"})
    with pytest.raises(DataError, match=r"augment=maybe: augment takes a bool"):
        check_options(load_pipeline("image_folder"), "image_folder", {"augment": "maybe"})
