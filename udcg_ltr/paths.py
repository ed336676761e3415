"""Where things live: the shared data folder and the cache folder, both configurable.

* ``UDCG_LTR_DATA`` (or the Hydra key ``paths.data_dir``): the read-only real data folder,
  default ``../shared/data`` relative to the project root.
* ``UDCG_LTR_CACHE`` (or ``paths.cache_dir``): caches (assembled models, LLM annotations),
  default ``~/.cache/udcg_ltr``.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    env = os.environ.get("UDCG_LTR_DATA")
    return Path(env) if env else (PROJECT_ROOT.parent / "shared" / "data")


def cache_dir() -> Path:
    env = os.environ.get("UDCG_LTR_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "udcg_ltr"


def shared_file(*parts: str) -> Path:
    return data_dir().joinpath(*parts)
