"""`import tfdist` selects tf-keras; Keras 3 loaded first gives the clear error."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def python(code):
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    return subprocess.run([sys.executable, "-c", code],
                          env=env,
                          capture_output=True,
                          text=True,
                          timeout=300)


def test_import_tfdist_first_gives_tf_keras():
    r = python("import tfdist, tensorflow as tf\n"
               "from tfdist.keras_check import require_legacy_keras\n"
               "import tf_keras\n"
               "print(require_legacy_keras().Model.__module__, tf_keras.__version__)")
    assert r.returncode == 0, r.stderr
    module, version = r.stdout.split()
    import tensorflow as tf

    # tf-keras of TensorFlow's own minor (each tf-keras release pins it).
    assert module.startswith("tf_keras.")
    assert version.split(".")[:2] == tf.__version__.split(".")[:2], (version, tf.__version__)


def test_keras3_loaded_first_raises_the_clear_error():
    r = python("import tensorflow as tf\n"
               "tf.keras.layers.Dense(1)\n"  # tf.keras resolves to Keras 3 here
               "import tfdist\n"
               "from tfdist.keras_check import require_legacy_keras\n"
               "require_legacy_keras()")
    assert r.returncode != 0
    assert "KerasVersionError: tf.keras is Keras 3." in r.stderr
    assert "put `import tfdist` before `import tensorflow`" in r.stderr
    assert "export TF_USE_LEGACY_KERAS=1" in r.stderr


KERAS3_SCRIPT = """
import tfdist
import tensorflow as tf
import keras
import numpy as np
rt = tfdist.init()
with rt.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
model.fit(np.zeros((8, 4)), np.zeros((8, 2)), epochs=1, verbose=0)
print("FIT DONE", rt.strategy_name)
"""


def test_keras3_model_trains_in_one_task_and_under_multi_worker(tmp_path):
    """Keras 3 works in one task and, with tfdist.keras3's corrections, on 2 workers."""
    script = tmp_path / "keras3_user.py"
    script.write_text(KERAS3_SCRIPT)
    one = python(f"exec(open({str(script)!r}).read())")
    assert one.returncode == 0 and "FIT DONE default" in one.stdout, one.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    two = subprocess.run([
        os.path.join(os.path.dirname(sys.executable), "tfdist"), "launch", "-n", "2", "--",
        sys.executable,
        str(script)
    ],
                         env=env,
                         capture_output=True,
                         text=True,
                         timeout=300)
    assert two.returncode == 0, two.stdout[-3000:] + two.stderr[-3000:]
    assert two.stdout.count("FIT DONE multi_worker") == 2


def test_keras3_fit_is_stopped_with_the_fix_where_it_does_not_work():
    r = python("import tfdist, keras, numpy as np\n"
               "from tfdist.keras_check import guard_keras3_fit, KERAS3_ENGINES\n"
               "assert 'an_unmeasured_engine' not in KERAS3_ENGINES\n"
               "guard_keras3_fit('an_unmeasured_engine')\n"
               "model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])\n"
               "model.compile(optimizer='sgd', loss='mse')\n"
               "model.fit(np.zeros((8, 4)), np.zeros((8, 2)), verbose=0)\n")
    assert r.returncode != 0
    assert "KerasVersionError: This model is a Keras 3." in r.stderr
    assert "--strategy=an_unmeasured_engine" in r.stderr
    assert "from tensorflow import keras" in r.stderr
