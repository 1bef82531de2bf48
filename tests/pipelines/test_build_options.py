"""build_dataset's options as one BuildOptions, and the recipes written before it: a user's
pipeline file whose dataset() takes seed, shuffle, epoch, repeat and drop_remainder as keywords
and passes them on to build_dataset one by one gives the same options and the same batches."""

import numpy as np
import pytest

import tfdist  # noqa: F401
from pipelines import check_options, load_pipeline, recipe_options
from tfdist.data import BuildOptions, make_input_context

COMMON = '''
import tensorflow as tf

from pipelines.digits import info, packed_dir  # noqa: F401
from tfdist.data import BuildOptions, TFRecordSource, build_dataset  # noqa: F401


def _features_labels(sample, seed):
    return sample["image"], tf.cast(sample["label"], tf.int32)
'''

# The recipe of docs/data.md before BuildOptions, as users copied it.
OLDER = COMMON + '''

def dataset(split, input_context, batch_size, *, seed=0, shuffle=True, epoch=0, repeat=False,
            drop_remainder=True, data_dir=None, **options):
    source = TFRecordSource.from_folder(packed_dir(data_dir), split)
    return build_dataset(source, input_context, batch_size, map_fn=_features_labels, seed=seed,
                         shuffle=shuffle and split == "train", epoch=epoch, repeat=repeat,
                         drop_remainder=drop_remainder, **options)
'''

# The same recipe as docs/data.md writes it now.
NOW = COMMON + '''

def dataset(split, input_context, batch_size, *, data_dir=None, **options):
    source = TFRecordSource.from_folder(packed_dir(data_dir), split)
    return build_dataset(source, input_context, batch_size,
                         BuildOptions.for_split(split, **options), map_fn=_features_labels)
'''


@pytest.fixture(scope="module")
def recipes(tmp_path_factory):
    folder = tmp_path_factory.mktemp("recipes")
    (folder / "older.py").write_text(OLDER)
    (folder / "now.py").write_text(NOW)
    data_dir = str(tmp_path_factory.mktemp("digits"))
    return load_pipeline(str(folder / "older.py")), load_pipeline(str(folder / "now.py")), data_dir


def labels(ds):
    return np.concatenate([y for _, y in ds.as_numpy_iterator()]).tolist()


def test_a_recipe_written_before_build_options_has_the_same_options(recipes):
    older, now, _ = recipes
    assert set(recipe_options(older)) == set(recipe_options(now)) == {
        "shard_by", "shuffle_buffer", "cache", "cache_parsed", "cycle_length", "deterministic",
        "prefetch", "autotune"
    }
    given = {"cache": "memory", "cycle_length": "2", "deterministic": "true"}
    assert check_options(older, "older", given) == check_options(now, "now", given) == {
        "cache": "memory",
        "cycle_length": 2,
        "deterministic": True
    }


@pytest.mark.parametrize("split,batch,keywords", [
    ("train", 16, dict(seed=3, epoch=1, shard_by="record", cache="memory")),
    ("train", 8, dict(seed=5, repeat=True)),
    ("test", 32, dict(shuffle=False, drop_remainder=False)),
])
def test_a_recipe_written_before_build_options_gives_the_same_batches(recipes, split, batch,
                                                                      keywords):
    older, now, data_dir = recipes
    for pid in range(2):
        ctx = make_input_context(2, pid, 2)
        a = older.dataset(split, ctx, batch, data_dir=data_dir, **keywords)
        b = now.dataset(split, ctx, batch, data_dir=data_dir, **keywords)
        if keywords.get("repeat"):
            a, b = a.take(200), b.take(200)  # past the end of the first epoch
        assert labels(a) == labels(b)


def test_the_bundled_recipe_reads_what_the_older_form_reads(recipes):
    older, _, data_dir = recipes
    ctx = make_input_context(2, 1, 2)
    keywords = dict(seed=7, epoch=2, shard_by="record", cache="memory")
    digits = load_pipeline("digits")
    assert labels(digits.dataset("train", ctx, 16, data_dir=data_dir, **keywords)) == labels(
        older.dataset("train", ctx, 16, data_dir=data_dir, **keywords))


def test_options_that_do_not_exist_are_named():
    with pytest.raises(
            TypeError,
            match=r"^cahce: not an option of build_dataset; its options: "
            r"seed, shuffle, epoch, .*prefetch, autotune \(tfdist.data.BuildOptions\)\.$"):
        BuildOptions(cache="memory").replace(cahce="disk")
    with pytest.raises(TypeError, match=r"^seeed: not an option of build_dataset"):
        load_pipeline("synthetic").dataset("train", make_input_context(1, 0, 1), 8, seeed=1)


def test_only_the_train_split_is_shuffled():
    assert BuildOptions.for_split("train", seed=2).shuffle is True
    assert BuildOptions.for_split("test", seed=2) == BuildOptions(seed=2, shuffle=False)
    assert BuildOptions.for_split("train", shuffle=False).shuffle is False
    assert BuildOptions().replace(cache="disk", epoch=3) == BuildOptions(cache="disk", epoch=3)
