"""The one error type of the data layer."""

from tfdist.errors import TfdistError


class DataError(TfdistError, ValueError):
    """Input data that cannot be read as asked.

    The message stands on its own in a job log: it names the file or value received, what was
    expected and what to change (a flag, an option, or the command that rewrites the data).
    """
