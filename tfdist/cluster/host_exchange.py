"""Every rank's host, where a launcher gives each process only its own rank (mpirun, flux run,
jsrun): each rank writes its host into a directory that all ranks see and reads the others'.

The same idea as PyTorch's FileStore (`init_method="file://..."`): no server, no port, only a
file system shared by the nodes (home directories are, on every cluster we know; otherwise
TFDIST_RENDEZVOUS_DIR names one). One directory per launch, named by the launcher's id for it;
the last rank to finish removes it. The result is exported (TFDIST_TASK_HOSTS), so the processes
a rank starts, and a second `detect()` in the same process, read it instead of exchanging again.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Optional

from tfdist import env_vars
from tfdist.cluster.errors import ClusterError
from tfdist.files import replacing

DIR = env_vars.RENDEZVOUS_DIR.name
TIMEOUT = env_vars.RENDEZVOUS_TIMEOUT.name
TASK_HOSTS = env_vars.TASK_HOSTS.name
DEFAULT_TIMEOUT = 300.0
STALE_SECONDS = 24 * 3600  # a launch whose ranks never all came: removed by a later one


def rendezvous_dir(environ: Mapping[str, str]) -> Path:
    if environ.get(DIR):
        return Path(environ[DIR])
    return Path(environ.get("HOME") or Path.home()) / ".tfdist" / "rendezvous"


def exchange_hosts(launch_id: str,
                   rank: int,
                   size: int,
                   host: str,
                   environ: Mapping[str, str],
                   poll: float = 0.05) -> tuple[str, ...]:
    """The host of every rank, in rank order; blocks until all `size` ranks have written theirs.
    Raises ClusterError naming the missing ranks and the directory after TFDIST_RENDEZVOUS_TIMEOUT
    seconds (300)."""
    known = _known(environ, launch_id, size)
    if known is not None:
        return known
    timeout = float(environ.get(TIMEOUT) or DEFAULT_TIMEOUT)
    root = rendezvous_dir(environ)
    where = root / re.sub(r"[^A-Za-z0-9_.-]", "_", launch_id)
    try:
        where.mkdir(parents=True, exist_ok=True)
        _write(where / f"host-{rank}", host)
    except OSError as e:
        raise ClusterError(f"Rank {rank} cannot write its host into {where} ({e}). Set {DIR} to a "
                           "writable directory that every node sees.") from None
    if rank == 0:
        _remove_stale(root, keep=where)
    deadline = time.monotonic() + timeout
    while True:
        missing = [r for r in range(size) if not (where / f"host-{r}").is_file()]
        if not missing:
            break
        if time.monotonic() > deadline:
            raise ClusterError(
                f"Rank {rank} of {size} waited {timeout:.0f} s in {where} for the hosts of "
                f"rank(s) {_ranks(missing)}, which never wrote them. Either they did not start "
                f"tfdist, or the nodes do not share {root}: set {DIR} to a directory on a file "
                f"system every node mounts (e.g. your project's), or raise {TIMEOUT}.")
        time.sleep(poll)
    hosts = tuple((where / f"host-{r}").read_text() for r in range(size))
    _write(where / f"done-{rank}", "")
    if all((where / f"done-{r}").is_file() for r in range(size)):
        shutil.rmtree(where, ignore_errors=True)  # every rank has read every host
    if isinstance(environ, MutableMapping):
        environ[TASK_HOSTS] = json.dumps({"launch": launch_id, "hosts": hosts})
    return hosts


def _known(environ: Mapping[str, str], launch_id: str, size: int) -> Optional[tuple[str, ...]]:
    """The hosts this process (or its parent) already exchanged for this launch."""
    try:
        known = json.loads(environ.get(TASK_HOSTS) or "null")
    except ValueError:
        return None
    if not isinstance(known, dict) or known.get("launch") != launch_id:
        return None
    hosts = tuple(known.get("hosts", ()))
    return hosts if len(hosts) == size else None


def _write(path: Path, text: str) -> None:
    # Whole or absent: a rank polling the directory never reads half a name.
    with replacing(str(path)) as tmp:
        Path(tmp).write_text(text)


def _remove_stale(root: Path, keep: Path) -> None:
    now = time.time()
    for old in root.iterdir():
        try:
            if old != keep and now - old.stat().st_mtime > STALE_SECONDS:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass


def _ranks(ranks: list[int]) -> str:
    shown = ", ".join(map(str, ranks[:8]))
    return shown + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")
