"""Keras 3 (`import keras`) under tfdist: what kind of Keras an object belongs to, and every
correction tfdist makes to Keras 3 so that its models train under each strategy.

One module per correction area, each tied to the Keras versions it was measured on and applied
when Keras 3 is imported (before or after tfdist). Engines and callbacks ask `is_keras3(...)`
here; they never test Keras versions themselves.
"""

import sys


def keras3_loaded():
    """The Keras 3 module when this process imported it (tfdist and TensorFlow never do)."""
    keras = sys.modules.get("keras")
    version = getattr(keras, "__version__", "")
    return keras if version.startswith("3.") else None


def is_keras3(obj) -> bool:
    """True when `obj` (a model, layer, optimizer or callback, or its class) is a Keras 3 one."""
    cls = obj if isinstance(obj, type) else type(obj)
    if keras3_loaded() is None:
        return False
    return any(c.__module__.split(".")[0] == "keras" for c in cls.__mro__)
