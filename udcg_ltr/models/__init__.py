"""Cross-encoder rerankers: training (``training.fit_reranker``), inference (``reranker.Reranker``), retriever
fusion, evaluation and sharing (``hub``). Imports are lazy: ``from udcg_ltr.models import Reranker`` does not
pull in the training stack.
"""

from __future__ import annotations

import importlib

_EXPORTS = {"Reranker": "reranker", "write_run": "reranker", "fit_reranker": "training",
            "evaluate_reranker": "evaluation", "per_query_metrics": "evaluation"}

__all__ = sorted(_EXPORTS)  # lazy names, so that a star import asks __getattr__ for them


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"udcg_ltr.models.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'udcg_ltr.models' has no attribute {name!r}")
