"""The one error type of tfdist: every failure it can explain in words derives from TfdistError.

Below every layer (it imports nothing), so the cluster, distribute, data and train errors share it.
The `tfdist` commands print a TfdistError's message without a traceback and exit with status 2;
any other exception is a bug or TensorFlow's own error and shows its traceback.
"""

# Where a stopped run resumes from, in every message that says how: the script's or tfdist
# train's --model_dir, or the job's MODEL_DIR.
SAME_RUN_DIRECTORY = "the same run directory (--model_dir or MODEL_DIR)"


class TfdistError(Exception):
    """A set-up or run that cannot work. The message stands on its own in a job log: it names the
    value received, what was expected and what to change."""


class ConfigError(TfdistError, ValueError):
    """An argument or flag value that cannot work (also a ValueError, as Python expects)."""
