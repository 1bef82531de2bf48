"""Horovod installed and importable: the version tfdist builds, how to install it, its Keras module
bound to tf-keras, and the error of a Horovod that is missing or whose tasks could not meet.

Set-up itself is elsewhere: the engine (tfdist.distribute.horovod_engine) initialises Horovod,
through the gloo rendezvous of tfdist.distribute.horovod_rendezvous where no horovodrun did
(tfdist.cluster.horovodrun). Horovod is imported inside the functions only: importing this module
is cheap, and TensorFlow-free (`tfdist doctor` reads INSTALL_HINT).
"""

from __future__ import annotations

from tfdist.errors import TfdistError

HOROVOD_VERSION = "0.28.1"
INSTALL_HINT = ("Install it with `make horovod` in a tfdist checkout (builds Horovod "
                f"{HOROVOD_VERSION} with gloo against this TensorFlow once and caches the wheel), "
                "or `PYTHON=<your venv>/bin/python tools/build_horovod_wheel.sh --install` for "
                "TensorFlow 2.16-2.21; or use --strategy=multi_worker, which needs no Horovod.")


class HorovodSetupError(TfdistError, RuntimeError):
    """Horovod is missing, or its tasks could not meet."""


def import_horovod_keras():
    """`horovod.tensorflow.keras`, bound to tf.keras's Keras (keras_compat.horovod_binding)."""
    from tfdist.keras_compat import horovod_binding as horovod_keras

    try:
        return horovod_keras.import_horovod_keras()
    except ImportError as err:
        raise HorovodSetupError(f"Cannot import horovod.tensorflow.keras ({err}). "
                                f"{INSTALL_HINT}") from err
