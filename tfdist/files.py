"""Files and folders that are whole or absent: written under a temporary name in the same folder,
then renamed into place (atomic on POSIX), so a crash mid-write leaves the previous version.

Below every layer (no TensorFlow, no tfdist imports): data/ writes manifests and shards with it,
train/ checkpoints, metrics and models.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

TMP_PREFIX = ".tmp-"  # leftovers of an interrupted write start with this


@contextlib.contextmanager
def replacing(path: str, folder: bool = False, tag: str = "", suffix: str = "") -> Iterator[str]:
    """Yield a temporary path beside `path` (a file name, or an empty folder when `folder`) to
    write into; when the block ends without an exception it replaces `path` (an existing folder
    is removed first), else it is removed. `tag` goes into the temporary name, so that leftovers
    can be told apart; `suffix` ends it (for writers that insist on one)."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    prefix = f"{TMP_PREFIX}{tag or os.path.basename(path)}-"
    if folder:
        tmp = tempfile.mkdtemp(prefix=prefix, dir=parent)
    else:
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=parent)
        os.close(fd)
    try:
        yield tmp
        if folder and os.path.isdir(path):
            shutil.rmtree(path)
        os.replace(tmp, path)  # readers see the old version or the new one, never a part
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.exists(tmp):
            os.unlink(tmp)


def write_json(path: str, obj: Any, indent: int = 2) -> None:
    """`obj` as JSON at `path`, whole or not at all."""
    with replacing(path) as tmp:
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=indent, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
