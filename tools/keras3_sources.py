"""Which Keras 3 releases have the code tfdist's corrections were run on: each corrected
function's source hash in each release, read from the release's wheel (no TensorFlow, no install),
marked where tfdist.keras_compat.known_sources.RUN knows it.

    python tools/keras3_sources.py [--wheels DIR] [VERSION ...]

VERSION: Keras releases (default: the newest patch of every 3.x minor on the package index).
Wheels are fetched once with `pip download` into DIR (default ~/.cache/tfdist/keras-wheels); a
wheel already there is read as it is. A hash is the sha256 (first 16 hex digits) of the function's
source, as `inspect.getsource` gives it and keras_compat.known_sources.source_hash computes it.
"""

from __future__ import annotations

import argparse
import ast
import glob
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tfdist.keras_compat.known_sources import MODULES, RUN  # noqa: E402 (no TensorFlow, no Keras)


def key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def newest_patches() -> list[str]:
    """The newest patch of every Keras 3.x minor the package index has."""
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "keras"],
                         capture_output=True,
                         text=True,
                         check=True).stdout
    listed = re.search(r"Available versions: (.*)", out).group(1).split(", ")
    newest: dict[tuple[int, int], str] = {}
    for v in listed:
        if re.fullmatch(r"3\.\d+\.\d+", v) and key(v) > key(newest.get(key(v)[:2], "0.0.0")):
            newest[key(v)[:2]] = v
    return sorted(newest.values(), key=key)


def wheel(version: str, wheels: Path) -> Path:
    found = glob.glob(str(wheels / f"keras-{version}-*.whl"))
    if not found:
        subprocess.run([
            sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", f"keras=={version}",
            "-d",
            str(wheels)
        ],
                       check=True)
        found = glob.glob(str(wheels / f"keras-{version}-*.whl"))
    return Path(found[0])


def source_hashes(path: Path) -> dict[str, str]:
    """Each function of MODULES -> its source hash in the wheel at `path` ("absent": none)."""
    hashes, archive = {}, zipfile.ZipFile(path)
    files = set(archive.namelist())
    for name, module in MODULES.items():
        stem = module.replace(".", "/")  # a module's file, or a package's __init__.py
        found = [f for f in (f"{stem}.py", f"{stem}/__init__.py") if f in files]
        if not found:
            hashes[name] = "absent"
            continue
        text = archive.read(found[0]).decode()
        node: ast.AST = ast.parse(text)
        for part in name.split("."):
            node = next((n for n in ast.iter_child_nodes(node)
                         if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part),
                        None)
            if node is None:
                break
        if node is None:
            hashes[name] = "absent"
            continue
        first = min([d.lineno for d in node.decorator_list] + [node.lineno])
        source = "".join(text.splitlines(keepends=True)[first - 1:node.end_lineno])
        hashes[name] = hashlib.sha256(source.encode()).hexdigest()[:16]
    return hashes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels",
                        type=Path,
                        default=Path(os.path.expanduser("~/.cache/tfdist/keras-wheels")))
    parser.add_argument("versions", nargs="*")
    args = parser.parse_args()
    args.wheels.mkdir(parents=True, exist_ok=True)
    versions = sorted(args.versions or newest_patches(), key=key)
    names = list(MODULES)
    print("| Keras | " + " | ".join(f"`{n}`" for n in names) + " | every correction run |")
    print("|---" * (len(names) + 2) + "|")
    for version in versions:
        hashes = source_hashes(wheel(version, args.wheels))
        cells = [h + (" (run)" if h in RUN[n] else "") for n, h in hashes.items()]
        every = all(h in RUN[n] for n, h in hashes.items())
        print(f"| {version} | " + " | ".join(cells) + f" | {'yes' if every else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
