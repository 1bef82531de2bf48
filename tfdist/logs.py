"""A quiet, honest terminal: what tfdist and TensorFlow print by default, and `TFDIST_VERBOSE=1`
(or `--verbosity=1` of the tfdist commands) to see everything.

By default, set up before TensorFlow loads (`import tfdist` calls `setup`):
- TensorFlow's C++ INFO and WARNING lines are off (TF_CPP_MIN_LOG_LEVEL=2; its errors stay), and
  its Python INFO lines (strategy set-up, every all-reduce it builds) too;
- tfdist's own lines go to stderr as `tfdist: ...` from the chief, and only warnings and errors
  from the other tasks;
- `NOISE`: lines TensorFlow 2.18 prints on every healthy run, some as red `E` lines that newcomers
  read as errors (CUDA plugins registered twice, cuInit on a machine without an NVIDIA driver,
  absl's note before its logging starts, absl's C++ INFO lines): `tfdist launch` and
  `tfdist train` drop them.
Imports no TensorFlow.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping
from typing import Optional

from tfdist import env_vars

VERBOSE_ENV = env_vars.VERBOSE.name
TF_CPP_QUIET = "2"  # TF_CPP_MIN_LOG_LEVEL: C++ errors only
# The one logger of tfdist: every module logs with logging.getLogger("tfdist"), which setup gives
# its handler and level and quiet_other_tasks quiets (a module's own __name__ logger reaches the
# same handler, but a module run as __main__ would not).
LOGGER = "tfdist"

_NOISE = [
    r"Unable to register cu(FFT|DNN|BLAS) factory: Attempting to register factory for plugin",
    r"All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    # INFO lines of absl's C++ logging (gRPC server started, coordination agent connected), which
    # TF_CPP_MIN_LOG_LEVEL does not reach.
    r"^I\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] ",
]
# Without an NVIDIA driver no GPU can be used, so TensorFlow's failing cuInit says nothing new.
if not os.path.exists("/dev/nvidiactl"):
    _NOISE.append(r"failed call to cuInit")
NOISE = re.compile("|".join(_NOISE))


def verbose(environ: Optional[Mapping[str, str]] = None) -> bool:
    environ = os.environ if environ is None else environ
    return environ.get(VERBOSE_ENV, "0") not in ("", "0")


# What continues a multi-line message: absl prints a session's options as protobuf text.
_CONTINUATION = re.compile(
    r'^(\s.*|\}|[a-z_]+ \{|[a-z_]+: (true|false|-?[\d.e+-]+|"[^"]*"|[A-Z_]+)|)$')


class NoiseFilter:
    """Drops the NOISE lines of one output stream, and the lines that continue one (never when
    verbose)."""

    def __init__(self, environ: Optional[Mapping[str, str]] = None):
        self.on, self._continued = not verbose(environ), False

    def keep(self, line: str) -> bool:
        if not self.on:
            return True
        if NOISE.search(line):
            self._continued = True
            return False
        if self._continued and _CONTINUATION.match(line.rstrip("\r\n")):
            return False
        self._continued = False
        return True


def filter_stream() -> None:
    """stdin to stdout without the noise: the filter process of filter_stderr. It ignores the
    signals meant for training and ends when the pipe closes, also after a crash of the process
    it filters, whose last words it still passes on."""
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    noise, out = NoiseFilter(), sys.stdout.buffer
    for line in sys.stdin.buffer:
        if noise.keep(line.decode(errors="replace")):
            out.write(line)
            out.flush()


def tf_cpp_level(environ: Optional[Mapping[str, str]] = None) -> str:
    """TensorFlow's C++ log level (TF_CPP_MIN_LOG_LEVEL) tfdist sets unless the user has one
    (tfdist.tf_environ sets it before TensorFlow loads, and `tfdist env` exports it)."""
    return "0" if verbose(environ) else TF_CPP_QUIET


class _Formatter(logging.Formatter):

    def format(self, record: logging.LogRecord) -> str:
        level = "" if record.levelno < logging.WARNING else f"{record.levelname.lower()}: "
        return f"tfdist: {level}{super().format(record)}"


def setup() -> None:
    """tfdist's logger and TensorFlow's Python logger, as described above (idempotent)."""
    logger = logging.getLogger(LOGGER)
    if not any(isinstance(h.formatter, _Formatter) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.propagate = False  # not twice through absl's root handler
    set_verbose(verbose())


def set_verbose(on: bool) -> None:
    """Everything (on) or the quiet default; tfdist commands call it for --verbosity>=1."""
    if on:
        os.environ[VERBOSE_ENV] = "1"
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"  # in effect where TensorFlow is not loaded yet
    logging.getLogger(LOGGER).setLevel(logging.DEBUG if on else logging.INFO)
    logging.getLogger("tensorflow").setLevel(logging.NOTSET if on else logging.WARNING)


def filter_stderr() -> None:
    """Drop the NOISE lines from this process's stderr, file descriptor 2 (TensorFlow's C++ logging
    writes there directly), through a small filter process. Call it before TensorFlow loads; a
    no-op when verbose."""
    if verbose():
        return
    sys.stderr.flush()
    read, write = os.pipe()
    original = os.dup(2)
    subprocess.Popen(
        [sys.executable, "-c", "from tfdist.logs import filter_stream; filter_stream()"],
        stdin=read,
        stdout=original,
        start_new_session=True)  # Ctrl-C and scancel's group signals pass it by
    os.close(read)
    os.close(original)
    os.dup2(write, 2)
    os.close(write)


def quiet_other_tasks(rank: int) -> None:
    """Only the chief (rank 0) tells what happens; the others tell only what goes wrong."""
    if rank != 0 and not verbose():
        logging.getLogger(LOGGER).setLevel(logging.WARNING)
