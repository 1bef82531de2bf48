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
    assert module.startswith("tf_keras.") and version.startswith("2.18")


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
