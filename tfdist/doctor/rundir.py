"""The check of the run directory: writable by the chief, and shared when the job spans nodes."""

from __future__ import annotations

import errno
import tempfile
from pathlib import Path
from typing import Optional

from tfdist.doctor.result import OK, PROBLEM, SKIP, WARN, Result

_NODE_LOCAL = ("/tmp", "/var/tmp", "/dev/shm")


def _local_root(path: Path) -> str:
    return next(root for root in _NODE_LOCAL if path.is_relative_to(root))


def check_model_dir(model_dir: Optional[str], multi_node: bool = False) -> Result:
    """The run directory, or the nearest existing parent it would be created in, is writable."""
    if not model_dir:
        return Result("model_dir", SKIP, "no --model_dir given")
    path = Path(model_dir).expanduser().absolute()
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        what = "is" if existing == path else f"cannot be created: {existing} is"
        return Result(
            "model_dir", PROBLEM, f"{path} {what} a file, not a directory. Choose another "
            "--model_dir, or move that file away.")
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".tfdist-doctor-"):
            pass
    except OSError as e:
        reason = "read-only file system" if e.errno == errno.EROFS else (e.strerror or str(e))
        return Result(
            "model_dir", PROBLEM, f"cannot write in {existing} ({reason}), so the chief cannot "
            f"write checkpoints in {path}. Choose a --model_dir on a file system you can write "
            f"(project or scratch space), or fix its permissions (ls -ld {existing}).")
    state = "writable" if existing == path else f"will be created in {existing} (writable)"
    if multi_node and any(path.is_relative_to(root) for root in _NODE_LOCAL):
        return Result(
            "model_dir", WARN, f"{path} {state}, but it is under {_local_root(path)}, which "
            "is usually node-local, and this job spans several nodes: a job resumed on other "
            "nodes would not find its checkpoints. Use a directory on a shared file system.")
    return Result("model_dir", OK, f"{path} {state}")
