"""The manifest: a small JSON file written last into a folder of shards.

It lists, per split, every shard with its record count, size and SHA-256, the feature spec, and
a fingerprint of the inputs that produced it. Readers use it to know the record counts without a
pass over the data (for the sharding plan) and to catch a truncated shard, which TensorFlow
reads as a clean, shorter file.
"""

from __future__ import annotations

import hashlib
import json
import os

from tfdist.data.errors import DataError
from tfdist.files import write_json

MANIFEST = "manifest.json"
VERSION = 1


def read_manifest(folder: str) -> dict:
    """The manifest.json that `tfdist convert` (write_shards) wrote into `folder`: splits with
    their records, shards with records, bytes and SHA-256, and the feature spec."""
    path = os.path.join(folder, MANIFEST)
    if not os.path.exists(path):
        raise DataError(f"{path} does not exist: {folder} holds no data packed by tfdist. Pack it "
                        "with `tfdist convert --source=... --output=" + folder + "`.")
    with open(path) as f:
        manifest = json.load(f)
    if manifest.get("tfdist_manifest") != VERSION:
        raise DataError(f"{path}: manifest version {manifest.get('tfdist_manifest')!r}, expected "
                        f"{VERSION}; re-pack with `tfdist convert --overwrite`.")
    return manifest


def write_manifest(folder: str, manifest: dict) -> None:
    """Write atomically: a reader sees either no manifest or the whole of it."""
    write_json(os.path.join(folder, MANIFEST), dict(manifest, tfdist_manifest=VERSION), indent=1)


def split_files(folder: str, manifest: dict, split: str) -> tuple[list[str], list[int]]:
    """Paths and record counts of a split's shards, after checking every shard's size."""
    splits = manifest["splits"]
    if split not in splits:
        raise DataError(f"{os.path.join(folder, MANIFEST)} has no split {split!r}; it has "
                        f"{sorted(splits)}.")
    paths, counts = [], []
    for shard in splits[split]["shards"]:
        path = os.path.join(folder, shard["file"])
        if not os.path.exists(path):
            raise DataError(f"{path} is listed in {MANIFEST} but missing; re-pack the data with "
                            "`tfdist convert --overwrite`.")
        size = os.path.getsize(path)
        if size != shard["bytes"]:
            raise DataError(f"{path} is {size} bytes but its manifest says {shard['bytes']}: the "
                            "shard was truncated or changed after packing (a truncated TFRecord "
                            "reads as a shorter file, so training would silently see fewer "
                            "samples). Copy it again or re-pack with `tfdist convert --overwrite`.")
        paths.append(path)
        counts.append(shard["records"])
    return paths, counts


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
