"""Named input-pipeline recipes built from tfdist.data, one small module each: digits,
image_folder, hdf5, tfds, synthetic. Copy pipelines/digits.py to write your own.

`load_pipeline(NAME or path.py)` finds one: a bundled name (`digits`) or a path to a user's .py
file. A recipe is a module with two functions (see pipelines/digits.py):
  info(data_dir=None, **options) -> {"input_shape", "num_classes", "num_train", "num_test"}
  dataset(split, input_context, batch_size, *, data_dir=None, **options)
      -> tf.data.Dataset of per-replica batches
tfdist calls dataset() with keywords: seed, shuffle, epoch, repeat, drop_remainder and data_dir,
and the options. A bundled recipe passes **options on as tfdist.data.BuildOptions
(`BuildOptions.for_split(split, **options)`: they hold seed ... drop_remainder too); a recipe
written before BuildOptions, with `seed=0, shuffle=True, epoch=0, repeat=False,
drop_remainder=True` as keyword parameters passed on to build_dataset one by one, works alike.

Its options are the other keyword parameters of the two functions (and, when dataset() passes
**options on, BuildOptions' fields): `--pipeline_option=key=value` gives them from the command
line, checked against those signatures and converted to the default's type.
(The loader lives here, beside the recipes, not in tfdist.data: the recipes are built on
tfdist.data, which knows nothing of them.)
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import pkgutil
from types import ModuleType
from typing import Any, Iterable

from tfdist.data import DataError

_REQUIRED = ("info", "dataset")
# What tfdist itself passes to every recipe: not options.
_STANDARD = ("split", "input_context", "batch_size", "seed", "shuffle", "epoch", "repeat",
             "drop_remainder", "data_dir", "map_fn")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def bundled_pipelines() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def load_pipeline(name_or_path: str) -> ModuleType:
    if name_or_path.endswith(".py") or os.sep in name_or_path:
        module = _load_file(name_or_path)
    else:
        if name_or_path not in bundled_pipelines():
            raise DataError(f"pipeline {name_or_path!r} is not a bundled pipeline "
                            f"({', '.join(bundled_pipelines())}) nor a path to a .py file.")
        module = importlib.import_module(f"pipelines.{name_or_path}")
    missing = [f for f in _REQUIRED if not callable(getattr(module, f, None))]
    if missing:
        raise DataError(f"pipeline {name_or_path!r} ({module.__file__}) defines no "
                        f"{' and no '.join(missing)}(); a pipeline module needs info(data_dir) and "
                        "dataset(split, input_context, batch_size, ...). Copy pipelines/digits.py "
                        "as a start.")
    return module


def _load_file(path: str) -> ModuleType:
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(path):
        raise DataError(f"pipeline file {path} does not exist.")
    stem = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(f"tfdist_user_pipeline_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parse_option_pairs(pairs: Iterable[str]) -> dict[str, str]:
    """["key=value", ...] (repeated --pipeline_option) -> {key: value}, values still strings."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise DataError(f"--pipeline_option={pair!r}: expected key=value, e.g. "
                            "--pipeline_option=name=mnist (repeat the flag for several).")
        options[key.strip()] = value
    return options


def recipe_options(module: ModuleType) -> dict[str, inspect.Parameter]:
    """The options a recipe takes: keyword parameters of dataset() and info() that tfdist does
    not set itself, plus BuildOptions' fields when dataset() passes **options on."""
    from tfdist.data.build import BuildOptions

    found: dict[str, inspect.Parameter] = {}
    forwards = False
    for fn in (module.dataset, module.info):
        for p in inspect.signature(fn).parameters.values():
            if p.kind is p.VAR_KEYWORD:
                forwards = forwards or fn is module.dataset
            elif p.kind is not p.VAR_POSITIONAL and p.name not in _STANDARD:
                found.setdefault(p.name, p)
    if forwards:
        for p in inspect.signature(BuildOptions).parameters.values():
            if p.name not in _STANDARD:
                found.setdefault(p.name, p)
    return found


def check_options(module: ModuleType, name: str, options: dict[str, Any]) -> dict[str, Any]:
    """Options named by the recipe's signature, string values converted to the type of the
    parameter (its default's, else its annotation's); a DataError names anything else."""
    known = recipe_options(module)
    checked = {}
    for key, value in options.items():
        if key not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise DataError(f"--pipeline_option={key}={value}: the {name!r} pipeline has no "
                            f"option {key!r}. Its options: {listed} ({module.__file__}).")
        checked[key] = _convert(known[key], value, key) if isinstance(value, str) else value
    return checked


def _convert(param: inspect.Parameter, value: str, key: str) -> Any:
    default = param.default
    if default is not param.empty and default is not None:
        kind = type(default)
    else:  # e.g. `num_classes: int | None = None` (annotations are strings here)
        text = str(param.annotation)
        kind = next((t for t in (bool, int, float) if t.__name__ in text), str)
    try:
        if kind is bool:
            if value.lower() not in _TRUE + _FALSE:
                raise ValueError(value)
            return value.lower() in _TRUE
        if kind in (int, float):
            return kind(value)
    except ValueError:
        raise DataError(f"--pipeline_option={key}={value}: {key} takes a {kind.__name__}" +
                        ("" if default is param.empty else f" (default {default!r})") +
                        ".") from None
    return value
