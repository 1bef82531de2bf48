"""tfdist keeps the user's Keras: `tf.keras` is what TensorFlow makes it (Keras 3, or tf-keras
where TF_USE_LEGACY_KERAS=1 is exported), whatever the place of `import tfdist`; `tfdist train`
trains that Keras unless --keras says otherwise; Keras 3's fit is stopped, naming the fix, only
where it was not measured."""

import json
import subprocess
import sys

import pytest

from tests.helpers import TFDIST, clean_environ

pytestmark = pytest.mark.slow


def environ(legacy):
    """The tests' environment with TensorFlow's switch as a user would have it: unset, or "1"."""
    env = clean_environ()
    env.pop("TF_USE_LEGACY_KERAS", None)
    if legacy:
        env["TF_USE_LEGACY_KERAS"] = "1"
    return env


def python(code, legacy=None):
    return subprocess.run([sys.executable, "-c", code],
                          env=environ(legacy),
                          capture_output=True,
                          text=True,
                          timeout=300)


# One process each: `import tfdist` after TensorFlow resolved tf.keras, and before TensorFlow (it
# forced tf-keras there until 2026-11). Neither place changes the switch or what tf.keras is.
@pytest.mark.parametrize("legacy,order,expected", [
    (None, "import tfdist\nimport tensorflow as tf\n", "keras"),
    ("1", "import tensorflow as tf\ntf.keras.layers.Dense(1)\nimport tfdist\n", "tf_keras"),
])
def test_tf_keras_is_what_tensorflow_makes_it(legacy, order, expected):
    r = python(
        order + "import os\n"
        "print(tf.keras.Model.__module__.split('.')[0], os.environ.get('TF_USE_LEGACY_KERAS'))",
        legacy)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == [expected, str(legacy)], r.stdout


# The script most TensorFlow users have: TensorFlow imported and tf.keras used before tfdist. Each
# rank reads its own data (different means), so BatchNormalization's moving statistics differ
# between the ranks unless tfdist keeps them averaged: every variable is compared, by hash.
USER_SCRIPT = """
import hashlib, sys
import numpy as np
import tensorflow as tf

Dense = tf.keras.layers.Dense  # tf.keras resolved before tfdist is imported
if sys.argv[1] == "model_first":  # one process only: a strategy over several needs init first
    tf.keras.Sequential([tf.keras.Input((4,)), Dense(2)])

import tfdist

rt = tfdist.init()
with rt.scope():
    model = tf.keras.Sequential([tf.keras.Input((4,)), Dense(8, activation="relu"),
                                 tf.keras.layers.BatchNormalization(), Dense(2)])
    model.compile(optimizer=rt.optimizer(tf.keras.optimizers.SGD(rt.scale_lr(0.1))), loss="mse")
rng = np.random.default_rng(rt.rank)
x = rng.normal(2.0 * rt.rank, 1.0, (64, 4)).astype("float32")
y = rng.normal(size=(64, 2)).astype("float32")
model.fit(rt.dataset(lambda ctx: tf.data.Dataset.from_tensor_slices((x, y)).batch(8).repeat()),
          epochs=2, steps_per_epoch=4, verbose=0, callbacks=rt.callbacks())
hashes = [hashlib.sha256(np.asarray(w).tobytes()).hexdigest()[:16] for w in model.get_weights()]
print("RESULT", type(model).__module__.split(".")[0], rt.strategy_name, rt.rank, *hashes)
"""


def results(stdout):
    """rank -> (Keras package, strategy, the hash of each variable) of each RESULT line."""
    found = {}
    for line in stdout.splitlines():
        if "RESULT " in line:
            package, strategy, rank, *hashes = line.split("RESULT ", 1)[1].split()
            found[int(rank)] = (package, strategy, hashes)
    return found


@pytest.fixture(scope="module")
def user_script(tmp_path_factory):
    path = tmp_path_factory.mktemp("keras_choice") / "user_script.py"
    path.write_text(USER_SCRIPT)
    return path


def test_a_script_that_built_a_tf_keras_model_first_trains(user_script):
    r = subprocess.run([sys.executable, str(user_script), "model_first"],
                       env=environ(None),
                       capture_output=True,
                       text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert results(r.stdout)[0][:2] == ("keras", "default"), r.stdout


@pytest.mark.newest
@pytest.mark.parametrize("legacy,package", [(None, "keras"), ("1", "tf_keras")])
def test_two_workers_train_the_users_keras_and_hold_the_same_model(user_script, legacy, package):
    r = subprocess.run([
        TFDIST, "launch", "-n", "2", "--strategy=multi_worker", "--", sys.executable,
        str(user_script), "after_init"
    ],
                       env=environ(legacy),
                       capture_output=True,
                       text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    found = results(r.stdout)
    assert sorted(found) == [0, 1], r.stdout[-3000:]
    assert found[0][:2] == (package, "multi_worker"), found
    # Dense(8): kernel, bias; BatchNormalization: gamma, beta, moving mean and variance; Dense(2).
    assert len(found[0][2]) == 8 and found[0][2] == found[1][2], found


@pytest.mark.parametrize("flag,legacy,keras", [([], None, 3), ([], "1", 2),
                                               (["--keras=2"], None, 2)])
def test_tfdist_train_trains_tf_keras_s_keras_unless_told(tmp_path, monkeypatch, flag, legacy,
                                                          keras):
    """Without --keras, the Keras tf.keras is; --keras=2 is tf-keras with the switch unset."""
    from tfdist.app.config import TrainConfig

    with monkeypatch.context() as m:
        m.delenv("TF_USE_LEGACY_KERAS", raising=False)
        if legacy:
            m.setenv("TF_USE_LEGACY_KERAS", legacy)
        assert TrainConfig(**({"keras": 2} if flag else {})).keras == keras
    if legacy:  # the run itself: the switch unset, where the flag decides
        return
    model_dir = tmp_path / "run"
    r = subprocess.run([
        TFDIST, "train", "--model=mlp", "--epochs=1", "--steps_per_epoch=2",
        f"--model_dir={model_dir}", *flag
    ],
                       env=environ(None),
                       capture_output=True,
                       text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((model_dir / "metrics.json").read_text())["keras"] == keras
    saved = json.loads(_keras_file_config(model_dir / "model.keras"))
    # Keras 3 saves its own version in the archive's metadata, tf-keras its 2.x.
    assert saved["keras_version"].split(".")[0] == str(keras), saved


def _keras_file_config(path) -> str:
    import zipfile

    with zipfile.ZipFile(path) as archive:
        return archive.read("metadata.json").decode()
