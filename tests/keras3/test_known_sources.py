"""One rule for the Keras code tfdist's corrections know (keras_compat.known_sources): the source
of each corrected function, read from a release's wheel by tools/keras3_sources.py the same way
as from the installed Keras; a Keras without a function a correction needs is refused where the
correction would act, and imports as before everywhere else."""

import importlib.util
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import pytest

from tests.helpers import REPO
from tfdist.keras_compat.known_sources import RUN, releases_run, source_hash


def test_every_entry_is_a_hash_and_the_releases_it_was_run_on():
    for name, sources in RUN.items():
        for digest, releases in sources.items():
            assert len(digest) == 16 and int(digest, 16) >= 0, (name, digest)
            assert releases and all(r.count(".") == 2 for r in releases), (name, releases)
    assert releases_run(*RUN)[-1] == "3.15.1"


def test_the_wheel_reader_hashes_as_inspect_does(tmp_path):
    """A wheel made of the installed Keras's files (3.8.0 on the default stack, 3.15.1 on the
    newest, whose hashes RUN has from inspect.getsource): the tool finds every corrected
    function and marks each as run."""
    from importlib.metadata import version

    installed = version("keras")
    keras_dir = Path(importlib.util.find_spec("keras").submodule_search_locations[0])
    with zipfile.ZipFile(tmp_path / f"keras-{installed}-py3-none-any.whl", "w") as wheel:
        for module in ("src/backend/tensorflow/trainer.py",
                       "src/optimizers/loss_scale_optimizer.py",
                       "src/trainers/data_adapters/__init__.py", "src/callbacks/csv_logger.py",
                       "src/trainers/epoch_iterator.py"):
            wheel.write(keras_dir / module, f"keras/{module}")
    out = subprocess.run([
        sys.executable,
        str(REPO / "tools" / "keras3_sources.py"), "--wheels",
        str(tmp_path), installed
    ],
                         capture_output=True,
                         text=True,
                         check=True).stdout.splitlines()
    row = out[2].split(" | ")
    assert row[0] == f"| {installed}" and row[-1] == "yes |", out
    assert all(cell.endswith(" (run)") for cell in row[1:-1]), out


@pytest.mark.parametrize("multi_worker", [False, True])
def test_a_keras_without_the_symbolic_build_is_refused_in_multi_worker_mode_only(multi_worker):
    """Keras < 3.5 has no `_maybe_symbolic_build`: its import is not broken, and multi-worker
    training stops with the fix instead of running code tfdist never ran."""
    import keras.src.backend.tensorflow.trainer as trainer

    from tfdist.keras_compat import multi_worker as correction

    module = types.SimpleNamespace(
        TensorFlowTrainer=type("TensorFlowTrainer", (), {}),
        reduce_per_replica=trainer.reduce_per_replica.__wrapped__,  # a source RUN knows
        _collective_all_reduce_multi_worker=lambda strategy: multi_worker)
    correction.apply(module)  # no AttributeError
    assert not hasattr(module.TensorFlowTrainer, "_maybe_symbolic_build")
    if multi_worker:
        with pytest.raises(correction.KerasCorrectionUnknown, match="_maybe_symbolic_build"):
            module.reduce_per_replica({"loss": 1.0}, object(), "auto")
    else:
        assert module.reduce_per_replica({"loss": 1.0}, None, "auto") == {"loss": 1.0}


def test_a_keras_that_takes_no_distributed_dataset_says_so(monkeypatch):
    """Keras < 3.9 takes no distributed dataset (what rt.dataset returns under a strategy): its
    "Unrecognized data type" becomes an error that names the fix. Keras's own is_tf_dataset
    decides: here made to answer as Keras 3.8's does."""
    import keras
    import tensorflow as tf
    from keras.src.trainers import data_adapters

    from tfdist.keras_compat.distributed_input import DistributedInputUnsupported

    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    dataset = strategy.distribute_datasets_from_function(
        lambda context: tf.data.Dataset.from_tensors(([[1.0]], [[1.0]])))
    model = keras.Sequential([keras.Input((1, )), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    assert keras.Model.fit._tfdist_distributed_input  # applied on import
    monkeypatch.setattr(data_adapters, "is_tf_dataset", lambda x: False)
    with pytest.raises(DistributedInputUnsupported, match=r"takes no distributed dataset.*3\.9"):
        model.fit(dataset, epochs=1, verbose=0)


def keras38_is_tf_dataset(tmp_path):
    """Keras 3.0-3.8's `is_tf_dataset`: the installed one less the single name 3.9 added (3.8.0's
    as it is on the default stack), loaded from a file so that its source is what inspect reads
    (its hash is RUN's for 3.0-3.8)."""
    import inspect

    from keras.src.trainers import data_adapters

    source = inspect.getsource(
        getattr(data_adapters.is_tf_dataset, "__wrapped__", data_adapters.is_tf_dataset))
    line = '                "DistributedDatasetsFromFunction",\n'
    path = tmp_path / "keras38_adapters.py"
    path.write_text(source.replace(line, ""))
    spec = importlib.util.spec_from_file_location("keras38_adapters", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert "3.8.0" in RUN["is_tf_dataset"].get(source_hash(module.is_tf_dataset), ())
    return module


def distributed_dataset():
    import tensorflow as tf

    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    return strategy, strategy.distribute_datasets_from_function(
        lambda context: tf.data.Dataset.from_tensors(([[1.0]], [[1.0]])))


def test_keras_before_3_9_takes_the_dataset_rt_dataset_returns(tmp_path, monkeypatch):
    """Keras 3.0-3.8 differ from 3.9 in their data adapters by one class name: corrected, their
    `is_tf_dataset` accepts a DistributedDatasetsFromFunction, and fit trains on it (here the
    installed Keras with 3.8's function in place). Other input is judged as before."""
    import keras
    from keras.src.trainers import data_adapters

    from tfdist.keras_compat.distributed_input import accept_datasets_from_function

    module = keras38_is_tf_dataset(tmp_path)
    strategy, dataset = distributed_dataset()
    original = module.is_tf_dataset
    assert not original(dataset)
    accept_datasets_from_function(module)
    accept_datasets_from_function(module)  # once
    assert module.is_tf_dataset.__wrapped__ is original
    assert module.is_tf_dataset(dataset)
    assert not module.is_tf_dataset([[1.0]])
    monkeypatch.setattr(data_adapters, "is_tf_dataset", module.is_tf_dataset)
    with strategy.scope():
        model = keras.Sequential([keras.Input((1, )), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
    history = model.fit(dataset, epochs=1, steps_per_epoch=1, verbose=0)
    assert len(history.history["loss"]) == 1


def test_is_tf_dataset_code_tfdist_does_not_know_is_left_alone(tmp_path):
    from tfdist.keras_compat.distributed_input import accept_datasets_from_function

    path = tmp_path / "other_adapters.py"
    path.write_text("def is_tf_dataset(x):\n    return False  # some future Keras\n")
    spec = importlib.util.spec_from_file_location("other_adapters", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    original = module.is_tf_dataset
    accept_datasets_from_function(module)
    assert module.is_tf_dataset is original
