"""The UDCG paper's analyses as one-call studies, each writing tables (markdown + CSV), a PNG and a report:
the metric-outcome correlation (the central experiment, :func:`run_correlation_study`), distractor sensitivity
(Table 1, :func:`run_distractor_sensitivity`), positional bias (Figure 1, :func:`run_positional_bias`), oracle
contexts by schema (Table 2, :func:`run_oracle_contexts`) and context-size sensitivity (Figure 2,
:func:`run_context_size`); all but the first take the fields of a config class (:data:`STUDY_ENTRIES`).

The entries' shape: :mod:`udcg_ltr.studies.common`. Names are imported lazily (:func:`get_study`).
"""

from __future__ import annotations

import importlib

#: ``evaluate.py mode=<name>`` -> (module, entry point, config class).
STUDY_ENTRIES = {"distractors": ("distractors", "run_distractor_sensitivity", "DistractorConfig"),
                 "position": ("position", "run_positional_bias", "PositionConfig"),
                 "oracle": ("oracle", "run_oracle_contexts", "OracleConfig"),
                 "context_size": ("context_size", "run_context_size", "ContextSizeConfig")}
#: Public name -> the module that defines it.
_EXPORTS = {name: module for module, *names in STUDY_ENTRIES.values() for name in names}
_EXPORTS.update(StudyReport="common", run_correlation_study="correlation", CorrelationReport="correlation")

__all__ = sorted(_EXPORTS) + ["STUDY_ENTRIES", "get_study"]  # lazy names: see models/__init__


def get_study(name: str):
    """``(run function, config class)`` of the study ``name`` (a key of :data:`STUDY_ENTRIES`)."""
    if name not in STUDY_ENTRIES:
        raise KeyError(f"unknown study {name!r} (known: {sorted(STUDY_ENTRIES)})")
    module, fn, cfg = STUDY_ENTRIES[name]
    mod = importlib.import_module(f"udcg_ltr.studies.{module}")
    return getattr(mod, fn), getattr(mod, cfg)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"udcg_ltr.studies.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'udcg_ltr.studies' has no attribute {name!r}")
