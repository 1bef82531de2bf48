"""tfdist convert: pack a data set into TFRecord or HDF5 shards with a manifest.

Sources: an image folder (one sub-folder per class, or train/ and test/ above those), a NumPy
.npz file, an HDF5 file, or a TFDS data set prepared in a local data_dir (tfds:NAME). Running it
again with the same inputs does nothing. Examples:
  tfdist convert --source=images/ --output=/scratch/me/images-tfr --shards=16
  tfdist convert --source=arrays.npz --output=packed/ --format=hdf5
  tfdist convert --source=tfds:mnist --tfds_data_dir=~/tensorflow_datasets --output=mnist-tfr
"""

from __future__ import annotations

import os
import sys

from absl import app, flags

from tfdist.cli.command import run_command

_SOURCE = flags.DEFINE_string("source", None, "Image folder, .npz file, .h5/.hdf5 file, or "
                              "tfds:NAME.")
_OUTPUT = flags.DEFINE_string("output", None, "Folder to write the shards and manifest.json to.")
_FORMAT = flags.DEFINE_enum("format", "tfrecord", ["tfrecord", "hdf5"], "Shard format.")
_SHARDS = flags.DEFINE_integer("shards",
                               8, "Shards per split; at least the number of workers "
                               "lets each read whole files.",
                               lower_bound=1)
_NAMES = flags.DEFINE_list(
    "names", None, ".npz/HDF5: the arrays to pack (default: all). "
    "Arrays named FEATURE_train / FEATURE_test become those splits.")
_TEST_FRACTION = flags.DEFINE_float("test_fraction",
                                    None, "Part held out as the test split "
                                    "when the source has none (image folders: 0.2; arrays: 0).",
                                    lower_bound=0.0,
                                    upper_bound=0.99)
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the train/test split.")
_TFDS_DATA_DIR = flags.DEFINE_string(
    "tfds_data_dir", None, "tfds:NAME: the local TFDS "
    "data_dir where NAME is prepared.")
_SPLITS = flags.DEFINE_list("splits", ["train", "test"], "tfds:NAME: the splits to pack.")
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace an output folder packed from other "
                               "inputs or options.")
_PROGRESS = flags.DEFINE_bool("progress", True, "Show a progress bar on stderr.")


def convert() -> tuple[dict, bool]:
    """Pack --source into --output; returns (manifest, written)."""
    from tfdist.data import DataError, packers

    source, output = os.path.expanduser(_SOURCE.value), os.path.expanduser(_OUTPUT.value)
    common = dict(num_shards=_SHARDS.value, overwrite=_OVERWRITE.value, progress=_PROGRESS.value)
    if source.startswith("tfds:"):
        if not _TFDS_DATA_DIR.value:
            raise DataError("--source=tfds:NAME needs --tfds_data_dir=DIR where NAME is "
                            "prepared (tfds build NAME --data_dir=DIR).")
        return packers.pack_tfds(source[len("tfds:"):],
                                 os.path.expanduser(_TFDS_DATA_DIR.value),
                                 output,
                                 splits=_SPLITS.value,
                                 format=_FORMAT.value,
                                 **common)
    if os.path.isdir(source):
        if _FORMAT.value != "tfrecord":
            raise DataError("an image folder packs to --format=tfrecord (encoded images, "
                            f"decoded in the pipeline); received --format={_FORMAT.value}.")
        fraction = 0.2 if _TEST_FRACTION.value is None else _TEST_FRACTION.value
        return packers.pack_image_folder(source,
                                         output,
                                         test_fraction=fraction,
                                         seed=_SEED.value,
                                         **common)
    if source.endswith((".npz", ".h5", ".hdf5")):
        return packers.pack_arrays(source,
                                   output,
                                   names=_NAMES.value,
                                   format=_FORMAT.value,
                                   test_fraction=_TEST_FRACTION.value or 0.0,
                                   seed=_SEED.value,
                                   **common)
    raise DataError(f"--source={source}: expected an image folder, a .npz or .h5/.hdf5 file, "
                    "or tfds:NAME.")


def summary(manifest: dict, output: str, written: bool) -> str:
    head = (f"wrote {output}"
            if written else f"nothing to do: {output} already holds these inputs (fingerprint "
            f"{manifest['fingerprint']})")
    lines = [f"{head}: {manifest['format']} shards of {manifest['source']}"]
    for split, info in manifest["splits"].items():
        size = sum(s["bytes"] for s in info["shards"])
        lines.append(f"  {split}: {info['records']} records in {len(info['shards'])} shards, "
                     f"{size / 1e6:.1f} MB ({info['shards'][0]['file']} ...)")
    features = ", ".join(f"{k} {v['dtype']}{v['shape']}" for k, v in manifest["features"].items())
    lines.append(f"  features: {features}")
    lines.append(f"  manifest: {os.path.join(output, 'manifest.json')}")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"tfdist convert takes no arguments; received {argv[1:]}.")
    manifest, written = convert()
    print(summary(manifest, os.path.expanduser(_OUTPUT.value), written))


def run(argv: list[str]) -> None:
    flags.mark_flags_as_required(["source", "output"])
    run_command(main, argv, sys.modules[__name__])
