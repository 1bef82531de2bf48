"""Named input-pipeline recipes built from tfdist.data, one small module each: digits,
image_folder, hdf5, tfds, synthetic. Copy pipelines/digits.py to write your own.

`load_pipeline(NAME or path.py)` finds one: a bundled name (`digits`) or a path to a user's .py
file. A recipe is a module with two functions (see pipelines/digits.py):
  info(data_dir=None) -> {"input_shape", "num_classes", "num_train", "num_test"}
  dataset(split, input_context, batch_size, *, seed=0, shuffle=True, epoch=0, repeat=False,
          drop_remainder=True, data_dir=None, **options) -> tf.data.Dataset of per-replica batches
(The loader lives here, beside the recipes, not in tfdist.data: the recipes are built on
tfdist.data, which knows nothing of them.)
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
from types import ModuleType

from tfdist.data import DataError

_REQUIRED = ("info", "dataset")


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
