"""Retriever fusion: a reranker's scores interpolated with the first-stage retriever's evidence.

A cross-encoder trained on a few hundred questions forgets what the retriever learned from millions of pairs;
the reranking literature interpolates the two scores (e.g. Wang, Zhuang & Zuccon, "BERT-based dense
retrievers require interpolation with BM25", ICTIR 2021)::

    s(q, p) = z_q(reranker(q, p)) + w * z_q(prior(q, p))

with ``z_q`` the standardisation over query q's candidates (the two scores live on unrelated scales) and
``prior`` the retriever's score (or ``-log rank``). :func:`fit_fusion_weight` chooses ``w`` on validation
questions by mean UDCG@k (Eq. 4), so fusion never does worse than the reranker alone (``w = 0``) there; the
weight is saved with the model and applied by :meth:`udcg_ltr.models.reranker.Reranker.score_records`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.data.scores import PassageScores, as_passage_scores
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.models.evaluation import align_scores, per_query_udcg

#: Interpolation weights :func:`fit_fusion_weight` tries (0: the reranker alone).
DEFAULT_WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)


def retriever_prior(record: QueryRecord) -> np.ndarray | None:
    """The retriever's evidence for each passage of ``record``: its score when every passage has one, else
    ``-log(rank)``; None when neither is known for every passage (nothing to fuse with)."""
    if record.passages and all(p.score is not None for p in record.passages):
        return np.array([float(p.score) for p in record.passages])
    if record.passages and all(p.rank is not None for p in record.passages):
        return -np.log(np.array([float(p.rank) for p in record.passages]))
    return None


def standardise(x: np.ndarray) -> np.ndarray:
    """``(x - mean) / std`` over one query's candidates (zeros when they are all equal)."""
    x = np.asarray(x, dtype=np.float64)
    std = x.std()
    return (x - x.mean()) / std if std > 1e-12 else np.zeros_like(x)


def check_weight(weight) -> float:
    """``weight`` as a float when it is a finite number >= 0 (booleans are not weights), else a ValueError."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float, np.integer, np.floating)) \
            or not np.isfinite(weight) or weight < 0:
        raise ValueError(f"fusion weight must be a finite number >= 0, got {weight!r}")
    return float(weight)


def fuse_scores(records: Sequence[QueryRecord], scores, weight: float) -> PassageScores:
    """Per record, ``z(scores) + weight * z(retriever_prior)`` (module docstring), as :class:`PassageScores` of
    ``records``; a record without a prior, or ``weight == 0``, keeps its reranker scores unchanged. ``scores``:
    :class:`PassageScores` or what :func:`~udcg_ltr.data.scores.as_passage_scores` takes."""
    weight = check_weight(weight)
    out = []
    for rec, s in zip(records, align_scores(records, scores)):
        prior = retriever_prior(rec) if weight > 0 else None
        out.append(s if prior is None else standardise(s) + weight * standardise(prior))
    return PassageScores.of(records, out)


def fit_fusion_weight(records: Sequence[QueryRecord], scores, llm: str, k: int = 5, *,
                      gamma: float = DEFAULT_GAMMA, relevance_threshold: int = 1,
                      weights: Sequence[float] = DEFAULT_WEIGHTS) -> tuple[float, dict[float, float]]:
    """The weight whose fused ranking has the highest mean UDCG@k (Eq. 4) on ``records``, the smaller on a tie
    (the reranker's own order wins a tie with the retriever's), and the mean UDCG@k of every weight tried."""
    if not records:
        raise ValueError("fit_fusion_weight needs at least one record")
    scores = as_passage_scores(records, scores)  # checked once, not once per weight
    curve = {float(w): float(np.mean(per_query_udcg(records, fuse_scores(records, scores, w), llm, k, gamma=gamma,
                                                    relevance_threshold=relevance_threshold)))
             for w in sorted(weights)}
    best = max(curve.values())
    return min(w for w, v in curve.items() if v >= best - 1e-12), curve
