"""Where tfdist keeps data it packs by itself (the bundled pipelines' caches)."""

from __future__ import annotations

import os

from tfdist import env_vars


def cache_dir(data_dir: str | None = None) -> str:
    """data_dir if given, else $TFDIST_CACHE, else ~/.cache/tfdist."""
    return os.path.abspath(
        os.path.expanduser(data_dir or os.environ.get(env_vars.CACHE.name)
                           or os.path.join("~", ".cache", "tfdist")))
