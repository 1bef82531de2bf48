"""The one error type of tfdist: every failure it can explain in words derives from TfdistError.

Below every layer (it imports nothing), so the cluster, distribute, data and train errors share it.
The `tfdist` commands print a TfdistError's message without a traceback and exit with status 2;
any other exception is a bug or TensorFlow's own error and shows its traceback.
"""


class TfdistError(Exception):
    """A set-up or run that cannot work. The message stands on its own in a job log: it names the
    value received, what was expected and what to change."""


class ConfigError(TfdistError, ValueError):
    """An argument or flag value that cannot work (also a ValueError, as Python expects)."""
