"""The UDCG paper's analyses as one-call studies, each writing tables (markdown + CSV), a PNG and a report.

==========================  ==========================  =========================================
study                       paper                        entry point (parameters)
==========================  ==========================  =========================================
metric-outcome correlation  central experiment           :func:`run_correlation_study` (keyword arguments)
distractor sensitivity      Table 1                      :func:`run_distractor_sensitivity` (:class:`DistractorConfig`)
positional bias             Figure 1                     :func:`run_positional_bias` (:class:`PositionConfig`)
oracle contexts by schema   Table 2                      :func:`run_oracle_contexts` (:class:`OracleConfig`)
context-size sensitivity    Figure 2                     :func:`run_context_size` (:class:`ContextSizeConfig`)
==========================  ==========================  =========================================

Every entry has the shape ``run_<name>(records, scorer_or_runs, *, llm, out_dir, logger=None,
cache=True, **params) -> StudyReport`` (see :mod:`udcg_ltr.studies.common`); the correlation study takes
its end-to-end runs and returns a :class:`~udcg_ltr.studies.correlation.CorrelationReport`, a ``StudyReport``.
:data:`STUDY_ENTRIES` maps the ``evaluate.py mode=<name>`` names to ``(function, config class)``. Names are
imported lazily.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "run_distractor_sensitivity": "distractors", "DistractorConfig": "distractors",
    "run_positional_bias": "position", "PositionConfig": "position",
    "run_oracle_contexts": "oracle", "OracleConfig": "oracle",
    "run_context_size": "context_size", "ContextSizeConfig": "context_size",
    "StudyReport": "common", "StudyContext": "common",
    "run_correlation_study": "correlation", "CorrelationReport": "correlation",
}

#: ``mode`` name -> (module, entry point, config class).
STUDY_ENTRIES = {
    "distractors": ("distractors", "run_distractor_sensitivity", "DistractorConfig"),
    "position": ("position", "run_positional_bias", "PositionConfig"),
    "oracle": ("oracle", "run_oracle_contexts", "OracleConfig"),
    "context_size": ("context_size", "run_context_size", "ContextSizeConfig"),
}

__all__ = sorted(_EXPORTS) + ["STUDY_ENTRIES", "get_study"]


def get_study(name: str):
    """``(run function, config class)`` of the study ``name`` (a key of :data:`STUDY_ENTRIES`)."""
    try:
        module, fn, cfg = STUDY_ENTRIES[name]
    except KeyError:
        raise KeyError(f"unknown study {name!r} (known: {sorted(STUDY_ENTRIES)})") from None
    mod = importlib.import_module(f"udcg_ltr.studies.{module}")
    return getattr(mod, fn), getattr(mod, cfg)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"udcg_ltr.studies.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'udcg_ltr.studies' has no attribute {name!r}")
