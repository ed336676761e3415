"""The correlation study (metrics vs end-to-end RAG accuracy), bootstrap tests, reports.

Modules: :mod:`~udcg_ltr.analysis.study` (``run_correlation_study``), :mod:`~udcg_ltr.analysis.bootstrap` (CIs,
paired test), :mod:`~udcg_ltr.analysis.report` (generic tables, figures and W&B logging shared by every study).
Per-query correlations live in :mod:`udcg_ltr.stats`, end-to-end runs in
:mod:`udcg_ltr.annotate.end_to_end`. ANSWER_PROB annotations come from :mod:`udcg_ltr.annotate`
(field ``answer_logprob``). Names are imported lazily.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "run_correlation_study": "study", "StudyResult": "study", "compute_context_metrics": "study",
    "k_sweep_rows": "study", "summarise": "study", "DEFAULT_METRICS": "study",
    "bootstrap_ci": "bootstrap", "paired_bootstrap_test": "bootstrap",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"udcg_ltr.analysis.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'udcg_ltr.analysis' has no attribute {name!r}")
