"""Utility annotation with real LLMs: P(NO-RESPONSE), answers, relevance, grading, baseline labels.

Modules (imported lazily, so ``import udcg_ltr.annotate`` does not load torch):

* :mod:`~udcg_ltr.annotate.prompts` -- :class:`PromptConfig` (UDCG paper, Figure 4), its version hash, the
  prompt data types :class:`PromptItem` and :class:`ScoreResult`;
* :mod:`~udcg_ltr.annotate.scorer` -- :class:`LLMScorer` (torch);
* :mod:`~udcg_ltr.annotate.llms` -- :func:`load_llm` (``"demo"``, ``"smollm2"``, a Hub id or a path);
* :mod:`~udcg_ltr.annotate.cache` -- :class:`AnnotationCache` (append-only JSONL segments);
* :mod:`~udcg_ltr.annotate.annotator` -- :class:`CachedScorer`, :func:`with_cache`, :func:`annotate_records`,
  :func:`ensure_annotations`;
* :mod:`~udcg_ltr.annotate.end_to_end` -- the LLM answering whole contexts, graded (:func:`run_contexts`);
* :mod:`~udcg_ltr.annotate.baselines` -- eRAG labels, ANSWER_PROB, Monte Carlo P(NO-RESPONSE);
* :mod:`~udcg_ltr.annotate.relevance` -- relevance from labels, containment or an LLM judge;
* :mod:`~udcg_ltr.annotate.judge` -- LLM judges (relevance, answer grading) with tolerant parsing;
* :mod:`~udcg_ltr.annotate.grading` -- rule-based CORRECT / ABSTAINED / WRONG;
* :mod:`~udcg_ltr.annotate.demo_llm` -- the demo LLM and the SmolLM2 fixture, set up offline;
* ``python -m udcg_ltr.annotate`` -- the Hydra CLI (``conf/annotate.yaml``).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "PromptConfig": "prompts",
    "LLMScorer": "scorer", "PromptItem": "prompts", "ScoreResult": "prompts",
    "load_llm": "llms",
    "AnnotationCache": "cache", "cache_key": "cache",
    "CachedScorer": "annotator", "annotate_records": "annotator", "AnnotationStats": "annotator",
    "erag_labels": "baselines", "MonteCarloConfig": "baselines",
    "label_relevance": "relevance",
    "RelevanceJudge": "judge", "AnswerJudge": "judge", "parse_judge_reply": "judge",
    "Outcome": "grading", "grade_answer": "grading", "is_abstention": "grading",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
