"""The variables TensorFlow reads when it loads, which every tfdist process (and every script run
after `eval "$(tfdist env --format=shell)"`) must see before `import tensorflow`; and the one
TensorFlow reads to choose its Keras, which tfdist reads and never sets.

No TensorFlow here: `import tfdist` and `tfdist env` use it before TensorFlow exists.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Optional

from tfdist.logs import tf_cpp_level

# TensorFlow's own switch: tf.keras is tf-keras when it is set, Keras 3 (TensorFlow >= 2.16)
# otherwise. The user's choice: tfdist reads it as TensorFlow does (the values TensorFlow 2.16-2.21
# accept, tensorflow/python/util/lazy_loader.py) and leaves it as it finds it.
LEGACY_KERAS = "TF_USE_LEGACY_KERAS"
_LEGACY_VALUES = ("true", "True", "1")


def legacy_keras(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether tf.keras is (or will be, once TensorFlow loads) tf-keras rather than Keras 3."""
    environ = os.environ if environ is None else environ
    return environ.get(LEGACY_KERAS) in _LEGACY_VALUES


def tf_environ(environ: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The values to set: TensorFlow's C++ log level unless `environ` has its own: tfdist.logs'
    (errors only; everything with TFDIST_VERBOSE=1), so batch logs stay readable."""
    environ = os.environ if environ is None else environ
    return {"TF_CPP_MIN_LOG_LEVEL": environ.get("TF_CPP_MIN_LOG_LEVEL", tf_cpp_level(environ))}


def apply(environ: Optional[MutableMapping[str, str]] = None) -> None:
    environ = os.environ if environ is None else environ
    environ.update(tf_environ(environ))
