"""The variables TensorFlow reads when it loads, which every tfdist process (and every script run
after `eval "$(tfdist env --format=shell)"`) must see before `import tensorflow`.

No TensorFlow here: `import tfdist` and `tfdist env` use it before TensorFlow exists.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Optional

from tfdist.logs import tf_cpp_level

# tf.keras is tf-keras (Keras 2), the only Keras under which every strategy runs `model.fit` and
# Horovod's Keras API works (docs/compatibility.md). TensorFlow reads it when tf.keras is first
# touched, so it is set unconditionally: a user's own 0 would break MultiWorkerMirrored `fit`.
FORCED = {"TF_USE_LEGACY_KERAS": "1"}


def tf_environ(environ: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The values to set: FORCED always, and TensorFlow's C++ log level unless `environ` has its
    own: tfdist.logs' (errors only; everything with TFDIST_VERBOSE=1), so batch logs stay
    readable."""
    environ = os.environ if environ is None else environ
    values = {"TF_CPP_MIN_LOG_LEVEL": environ.get("TF_CPP_MIN_LOG_LEVEL", tf_cpp_level(environ))}
    values.update(FORCED)
    return values


def apply(environ: Optional[MutableMapping[str, str]] = None) -> None:
    environ = os.environ if environ is None else environ
    environ.update(tf_environ(environ))
