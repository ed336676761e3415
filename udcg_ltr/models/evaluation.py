"""Scoring a reranker: its top-k contexts under the metric table (``udcg@k``: Eq. 4), optionally end to end.

R and nDCG's ideal come from each query's whole judged pool when given; queries the qrels do not judge are
left out of the relevance metrics, as trec_eval does, and counted in ``unjudged_queries``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from udcg_ltr import metrics as M
from udcg_ltr.annotate.end_to_end import end_to_end_selection
from udcg_ltr.data.padded import PaddedSlates, judged_pools, pad_records
from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.data.scores import PassageScores, as_passage_scores
from udcg_ltr.metrics._common import rank_by_scores
from udcg_ltr.metrics.table import (
    GradedLabels,
    JudgedPool,
    MetricOptions,
    RankedRows,
    metric_key,
    metric_table,
    summarize,
)
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA


def slate_metrics(scores, *, options: MetricOptions, mask=None, utility=None, graded=None,
                  relevance_threshold: float = 1, pool: JudgedPool | None = None, retrieval_scores=None,
                  prefix: str = "", ties: str = "stable", ids=None) -> dict[str, float]:
    """Metrics of the top-k by ``scores`` of each row, under the metric table's keys: ``{prefix}udcg@k``, ``ndcg@k`` ...

    ``options``: the cutoff ``k`` and ``gamma`` (:class:`~udcg_ltr.metrics.table.MetricOptions`). ``utility``
    (signed, Eq. 2) enables ``udcg@k`` (Eq. 4) and ``utility@k``; ``graded`` (raw labels) the relevance
    columns; ``pool`` (R, the ideal gains and ``judged``, in passage order; default the row) describes the
    judged pool (:func:`udcg_ltr.data.padded.judged_pools`); ``ties`` / ``ids``: as in ``rank_by_scores``.
    """
    k, pool = options.k, pool or JudgedPool()
    scores, mask = M.as_padded(scores, mask)
    order = M.rank_by_scores(scores, mask, ties=ties, ids=ids)
    m = M.take_ranked(mask, order)
    out: dict[str, float] = {}
    if utility is not None:
        u = M.take_ranked(M.as_padded(utility, mask)[0], order)
        out[metric_key("udcg", k)] = M.mean(M.udcg(u, m, k=k, gamma=options.gamma)).value
        top = M.cutoff_mask(m, k)
        out[metric_key("utility", k)] = float(np.mean(np.where(top, u, 0.0).sum(1) / np.maximum(top.sum(1), 1)))
    if graded is not None:
        g = M.take_ranked(M.as_padded(graded, mask)[0], order)
        ideal_gains, ideal_mask = (g, m) if pool.ideal_gains is None else (pool.ideal_gains, pool.ideal_mask)
        ok = None if pool.judged is None else np.asarray(pool.judged, dtype=bool).reshape(-1)
        rs = None if retrieval_scores is None else M.take_ranked(M.as_padded(retrieval_scores, mask)[0], order)
        rows = RankedRows(mask=m, relevant=(g >= relevance_threshold) & m, gains=g, scores=rs)
        judged = JudgedPool(n_relevant=pool.n_relevant, ideal_gains=ideal_gains, ideal_mask=ideal_mask, judged=ok)
        grades = g[m]
        labels = None
        if np.all(np.mod(grades, 1) == 0) and grades.min(initial=0) >= 0 and grades.max(initial=0) <= 5:
            # grades 0..5: the set-based family (RA-nWG, PROC, N-Recall, Harm ...) joins
            labels = GradedLabels(grades=g, pool=ideal_gains, pool_mask=ideal_mask)
        table = metric_table(options=options, rows=rows, pool=judged, graded=labels)
        out.update({name: float(res.value) for name, res in summarize(table).items()})
        if ok is not None:
            out["unjudged_queries"] = float((~ok).sum())
    return {f"{prefix}{name}": value for name, value in out.items()}


def align_scores(records: Sequence[QueryRecord], scores) -> list[np.ndarray]:
    """Per-record score arrays in passage order (read-only), from anything
    :func:`~udcg_ltr.data.scores.as_passage_scores` takes: :class:`PassageScores`, a list of arrays or
    ``{qid: {pid: score}}``."""
    return as_passage_scores(records, scores).aligned(records)


def scored_slates(records: Sequence[QueryRecord], scores, llm: str | None, relevance_threshold: int
                  ) -> tuple[PassageScores, PaddedSlates, np.ndarray]:
    """``(scores as PassageScores, padded slates in passage order, [Q, W] scores with 0 at padding)``."""
    keyed = as_passage_scores(records, scores)
    slates = pad_records(records, llm=llm, relevance_threshold=relevance_threshold, order="given",
                         selector_features=False)
    return keyed, slates, keyed.padded(slates)


def evaluate_reranker(records: Sequence[QueryRecord], scores, llm: str | None, k: int = 5, *,
                      gamma: float = DEFAULT_GAMMA, relevance_threshold: int = 1, scorer: Any = None,
                      match_rule: str = "contains", prefix: str = "", ties: str = "stable") -> dict[str, float]:
    """Score each query's top-k by ``scores`` (:class:`PassageScores`, or as :func:`align_scores` takes them) with
    the metric table.

    ``llm`` names the utility annotations (None: relevance metrics only). With ``scorer`` (an
    :class:`udcg_ltr.annotate.scorer.LLMScorer`), each top-k context (rank order = prompt order) is answered
    and graded: ``correct_rate``, ``abstained_rate``, ``wrong_rate``.
    """
    keyed, slates, padded_scores = scored_slates(records, scores, llm, relevance_threshold)
    qrels = judged_pools(records, relevance_threshold).from_qrels.any()
    retrieval = np.where(slates.mask, slates.retrieval_score, 0.0)
    pool = JudgedPool(n_relevant=slates.n_relevant, ideal_gains=slates.ideal_gains, ideal_mask=slates.ideal_mask,
                      judged=slates.judged if qrels else None)
    out = slate_metrics(padded_scores, options=MetricOptions(k=k, gamma=gamma), mask=slates.mask,
                        utility=slates.utility if llm is not None else None, graded=slates.relevance,
                        relevance_threshold=relevance_threshold, pool=pool,
                        retrieval_scores=retrieval if np.isfinite(retrieval).all() else None, ties=ties,
                        ids=slates.pids)
    if scorer is not None:
        answered = end_to_end_selection(records, top_k_by(records, keyed, k), scorer,
                                        relevance_threshold=relevance_threshold, match_rule=match_rule)
        out.update({key: v for key, v in answered.items() if isinstance(v, float)})
    out["n_queries"] = float(len(records))
    return {f"{prefix}{name}": value for name, value in out.items()}


def per_query_metrics(records: Sequence[QueryRecord], scores, llm: str, k: int = 5, *,
                      gamma: float = DEFAULT_GAMMA, relevance_threshold: int = 1) -> dict[str, np.ndarray]:
    """``{"udcg@k", "ndcg@k", "hits@k"}`` -> ``[Q]`` values of each query's top-k by ``scores`` (UDCG: Eq. 4),
    for paired tests of two rankers; without qrels their means are :func:`evaluate_reranker`'s."""
    _, slates, padded = scored_slates(records, scores, llm, relevance_threshold)
    ranked = slates.reorder(M.rank_by_scores(padded, slates.mask))
    rows = RankedRows(mask=ranked.mask, relevant=ranked.relevant, gains=ranked.relevance, utilities=ranked.utility)
    table = metric_table(options=MetricOptions(k=k, gamma=gamma), rows=rows,
                         pool=JudgedPool(ideal_gains=slates.relevance, ideal_mask=slates.mask))
    return {key: table[key] for key in (metric_key("udcg", k), metric_key("ndcg", k), metric_key("hits", k))}


def per_query_udcg(records: Sequence[QueryRecord], scores, llm: str, k: int = 5, *,
                   gamma: float = DEFAULT_GAMMA, relevance_threshold: int = 1) -> np.ndarray:
    """``[Q]`` UDCG@k (Eq. 4) of each query's top-k by ``scores``: the values ``udcg@k`` averages."""
    return per_query_metrics(records, scores, llm, k, gamma=gamma, relevance_threshold=relevance_threshold)[metric_key("udcg", k)]


def top_k_by(records: Sequence[QueryRecord], scores, k: int | np.ndarray, *, ties: str = "stable") -> list[list[str]]:
    """Each query's top-``k`` passage ids by descending score (:class:`PassageScores`, arrays aligned with
    ``record.passages`` or ``{qid: {pid: score}}``), in rank order; ``k`` may vary per query. ``ties``: as
    :func:`slate_metrics`."""
    ks = np.broadcast_to(np.asarray(k), (len(records),))
    ids = [[p.pid for p in rec.passages] for rec in records]
    return [[pids[i] for i in rank_by_scores(s[None, :], ties=ties, ids=[pids])[0][: int(kq)]]
            for pids, s, kq in zip(ids, align_scores(records, scores), ks)]
