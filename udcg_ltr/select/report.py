"""The dynamic-k analysis report of :mod:`udcg_ltr.metrics.distractor` for several rankings of the same queries.

For each ranking (e.g. the retriever's order and the reranker's order) and each utility source,
:func:`dynamic_k_report` runs :func:`~udcg_ltr.metrics.distractor.distractor_analysis` on the
ranked rows and averages over queries:

* utility sources: ``"heuristic"`` = :func:`~udcg_ltr.metrics.distractor.heuristic_utilities` from
  the gold relevance labels and the ranking's **own** scores (rule 3 with the shift-invariant
  ``"range"`` rule, since reranker logits can be negative; +1 relevant, -0.5 high-scoring or
  top-3 non-relevant, 0 otherwise); ``"llm"`` = the signed LLM utilities of Eq. 2;
* ``best_k`` (mean, median, histogram): the smallest ``j`` maximising the cumulative utility minus
  ``harm_weight`` times the harm over the first ``j`` passages (undiscounted);
* at the cutoff ``k`` (``None``: the whole list): distractor-aware DCG, DCG without distractors,
  harm, distractor rate, harm share, and the shares of SAFE / RISKY / DANGEROUS contexts;
* ``udcg_at_best_k``: UDCG (Eq. 4, LLM utilities) of each query's top-``best_k`` set, which tells
  how good the analysis' own choice of k is for the LLM.

This is an *analysis* (it reads gold labels), not a selector: the labels-free selector built on
the same rule is :class:`udcg_ltr.select.baselines.CumulativeUtilityRule`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from udcg_ltr.metrics.distractor import (
    DANGEROUS,
    RISKY,
    SAFE,
    AssessmentThresholds,
    HeuristicConfig,
    distractor_analysis,
    heuristic_utilities,
)
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.select.base import rank_slates, udcg_of_kept

#: Rule 3 on the ranking's own scores, shift invariant (reranker logits can be negative).
RANGE_HEURISTIC = HeuristicConfig(score_rule="range")
DEFAULT_THRESHOLDS = AssessmentThresholds()

REPORT_COLUMNS = ("ranking", "utilities", "n", "cutoff", "best_k_mean", "best_k_median", "best_k_hist",
                  "udcg_at_best_k", "dcg", "dcg_without_distractors", "harm", "distractor_rate", "harm_share",
                  "safe", "risky", "dangerous")


def dynamic_k_report(rankings: Mapping[str, tuple[Any, Any]], *, k: int | None = None, harm_weight: float = 1.0,
                     min_k: int = 1, sources: tuple[str, ...] = ("heuristic", "llm"), gamma: float = DEFAULT_GAMMA,
                     heuristic: HeuristicConfig = RANGE_HEURISTIC,
                     thresholds: AssessmentThresholds = DEFAULT_THRESHOLDS) -> list[dict[str, Any]]:
    """Rows (one per ranking x utility source) of the module doc's measures.

    ``rankings`` maps a name to ``(scores, slates)``: ``[Q, W]`` scores aligned with the columns of
    a :class:`~udcg_ltr.data.padded.PaddedSlates` (with utilities for the ``"llm"`` source).
    """
    rows = []
    for name, (scores, slates) in rankings.items():
        extra = {"relevant": np.asarray(slates.relevant, dtype=np.float64),
                 "is_distractor": np.asarray(slates.is_distractor, dtype=np.float64)}
        ranked = rank_slates(scores, slates, extra=extra)
        m = ranked.mask
        for source in sources:
            if source == "heuristic":
                u = heuristic_utilities(ranked.extra["relevant"], ranked.scores, m,
                                        is_distractor=ranked.extra["is_distractor"] > 0, config=heuristic)
            elif source == "llm":
                if ranked.utility is None:
                    raise ValueError(f"ranking {name!r}: the 'llm' source needs annotated utilities")
                u = ranked.utility
            else:
                raise ValueError(f"unknown utility source {source!r} (use 'heuristic' or 'llm')")
            a = distractor_analysis(u, m, k=k, discount="log2", dynamic_discount=None, harm_weight=harm_weight,
                                    min_k=min_k, thresholds=thresholds)
            hist = np.bincount(a.best_k, minlength=ranked.width + 1)
            row = {"ranking": name, "utilities": source, "n": len(ranked), "cutoff": "all" if k is None else k,
                   "best_k_mean": float(a.best_k.mean()), "best_k_median": float(np.median(a.best_k)),
                   "best_k_hist": " ".join(str(int(c)) for c in hist)}
            row["udcg_at_best_k"] = (float(udcg_of_kept(ranked.utility, m, a.best_k, gamma=gamma).mean())
                                     if ranked.utility is not None else float("nan"))
            rate = a.distractor_rate[np.isfinite(a.distractor_rate)]
            row.update({"dcg": float(a.dcg.mean()), "dcg_without_distractors": float(a.dcg_without_distractors.mean()),
                        "harm": float(a.distractor_harm.mean()),
                        "distractor_rate": float(rate.mean()) if rate.size else float("nan"),
                        "harm_share": float(a.harm_share.mean()),
                        "safe": float((a.assessment == SAFE).mean()), "risky": float((a.assessment == RISKY).mean()),
                        "dangerous": float((a.assessment == DANGEROUS).mean())})
            rows.append(row)
    return rows


__all__ = ["REPORT_COLUMNS", "dynamic_k_report"]
