"""The one error type of the cluster layer."""

from tfdist.errors import ConfigError


class ClusterError(ConfigError):
    """A cluster set-up that cannot work.

    The message stands on its own in a job log: it names the value received, what was expected and
    the Slurm option, flag or environment variable to change.
    """
