"""Where things live, both configurable: the read-only shared data folder (``UDCG_LTR_DATA`` or the
Hydra key ``paths.data_dir``; default ``../shared/data`` from the project root) and the caches of
assembled models and LLM annotations (``UDCG_LTR_CACHE`` or ``paths.cache_dir``; ``~/.cache/udcg_ltr``).
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    return Path(os.environ.get("UDCG_LTR_DATA") or PROJECT_ROOT.parent / "shared" / "data")


def cache_dir() -> Path:
    return Path(os.environ.get("UDCG_LTR_CACHE") or Path.home() / ".cache" / "udcg_ltr")


def shared_file(*parts: str) -> Path:
    return data_dir().joinpath(*parts)
