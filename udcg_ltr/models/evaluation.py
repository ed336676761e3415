"""Scoring a reranker: its top-k contexts under the metric table, and optionally end to end.

:func:`slate_metrics` is what validation uses on padded ``[Q, n]`` arrays: rank each row by
score (ties: earlier column first, or ``ties="trec"``: passage id descending as trec_eval), keep
the top k, and compute UDCG@k (Eq. 4 on the signed utilities of the top-k set), nDCG@k (graded
gains, DCG / IDCG with the ideal taken from the query's whole judged pool when given, else from
the row), MRR@k, Precision@k, Recall@k, HITS@k, MAP@k (R of the judged pool) and the mean utility
of the context. Queries marked unjudged (``judged`` False: their qrels judge nothing) are left out
of the relevance metrics, as trec_eval does, and counted in ``unjudged_queries``. :func:`evaluate_reranker` does the same from
:class:`QueryRecord` s and per-passage scores, and with an LLM scorer it also asks the LLM to
answer each top-k context and grades the answers (correct / abstained / wrong,
:mod:`udcg_ltr.annotate.grading`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from udcg_ltr import metrics as M
from udcg_ltr.data.padded import judged_pools, pad_records
from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA


def _table_columns(*, k, gamma, mask, utility, graded, relevance_threshold, n_relevant, ideal_gains, ideal_mask,
                   retrieval_scores, judged) -> dict[str, float]:
    """Means of the metric helper's table (:func:`udcg_ltr.metrics.table.metric_table`) on ranked rows.

    Adds the families not computed here (RA-nWG, PROC, %PROC, N-Recall, Harm, distractor-aware DCG
    ...) under the table's own names; NA counts are left out (means skip NA).
    """
    try:
        from udcg_ltr.metrics.table import metric_table, summarize
    except ImportError:  # pragma: no cover - the table ships with the metrics package
        return {}
    kw: dict[str, Any] = dict(k=k, gamma=gamma, mask=mask, relevant=(graded >= relevance_threshold) & mask,
                              n_relevant=n_relevant, utilities=utility, gains=graded, ideal_gains=ideal_gains,
                              ideal_mask=ideal_mask, judged=judged)
    ints = np.all(np.equal(np.mod(graded[mask], 1), 0)) and graded[mask].min(initial=0) >= 0 \
        and graded[mask].max(initial=0) <= 5
    if ints:
        kw.update(graded=graded, pool_graded=ideal_gains, pool_graded_mask=ideal_mask)
    if retrieval_scores is not None:
        kw["scores"] = retrieval_scores
    summary = summarize(metric_table(**kw))
    return {name: float(res.value) for name, res in summary.items() if np.isfinite(res.value)}


def slate_metrics(scores, *, k: int, utility=None, graded=None, mask=None, relevance_threshold: float = 1,
                  n_relevant=None, ideal_gains=None, ideal_mask=None, gamma: float = DEFAULT_GAMMA,
                  retrieval_scores=None, table: bool = True, prefix: str = "", judged=None, ties: str = "stable",
                  ids=None) -> dict[str, float]:
    """Metrics of the top-k by ``scores`` of each row: ``{prefix}udcg@k``, ``ndcg@k``, ``mrr@k`` ...

    ``utility`` (signed, Eq. 2) enables UDCG@k and ``utility@k``; ``graded`` (raw labels) enables the
    relevance metrics (binary ones count ``label >= relevance_threshold``); ``n_relevant`` (R) and
    ``ideal_gains`` describe the whole judged pool when it is larger than the row (TREC qrels:
    :func:`udcg_ltr.data.padded.judged_pools`). ``judged`` (bool per row) leaves unjudged queries out
    of the relevance metrics and adds ``unjudged_queries``. ``ties``/``ids``: the tie-break of
    :func:`udcg_ltr.metrics.rank_by_scores`. Our names are lower case (``ndcg@k`` uses graded gains);
    ``table=True`` adds the metric helper's table under its names (``RA-nWG@k``, ``DA-DCG@k`` ...)
    where they do not repeat ours (its ``nDCG@k`` is left out when ``ndcg@k`` is here).
    """
    scores, mask = M.as_padded(scores, mask)
    order = M.rank_by_scores(scores, mask, ties=ties, ids=ids)
    m = M.take_ranked(mask, order)
    ok = None if judged is None else np.asarray(judged, dtype=bool).reshape(-1)

    def avg(values) -> float:  # unjudged queries are NA (left out), as trec_eval drops them
        return M.mean(values if ok is None else np.where(ok, values, np.nan)).value

    out: dict[str, float] = {}
    if utility is not None:
        u = M.take_ranked(M.as_padded(utility, mask)[0], order)
        out[f"udcg@{k}"] = M.mean(M.udcg(u, m, k=k, gamma=gamma)).value
        top = M.cutoff_mask(m, k)
        out[f"utility@{k}"] = float(np.mean(np.where(top, u, 0.0).sum(1) / np.maximum(top.sum(1), 1)))
    if graded is not None:
        g = M.take_ranked(M.as_padded(graded, mask)[0], order)
        own_pool = ideal_gains is None
        if own_pool:
            ideal_gains, ideal_mask = g, m
        out[f"ndcg@{k}"] = avg(M.ndcg(g, m, k=k, ideal_gains=ideal_gains, ideal_mask=ideal_mask))
        b = dict(threshold=relevance_threshold)
        out[f"mrr@{k}"] = avg(M.mrr(g, m, k=k, **b))
        out[f"precision@{k}"] = avg(M.precision(g, m, k=k, **b))
        out[f"recall@{k}"] = avg(M.recall(g, m, k=k, n_relevant=n_relevant, **b))
        out[f"hits@{k}"] = avg(M.hits(g, m, k=k, **b))
        out[f"map@{k}"] = avg(M.average_precision(g, m, k=k, n_relevant=n_relevant, **b))
        if ok is not None:
            out["unjudged_queries"] = float((~ok).sum())
        if table:
            rs = None if retrieval_scores is None else M.take_ranked(M.as_padded(retrieval_scores, mask)[0], order)
            extra = _table_columns(k=k, gamma=gamma, mask=m, utility=u if utility is not None else None, graded=g,
                                   relevance_threshold=relevance_threshold, n_relevant=n_relevant,
                                   ideal_gains=None if own_pool else ideal_gains,
                                   ideal_mask=None if own_pool else ideal_mask, retrieval_scores=rs, judged=ok)
            taken = {name.lower() for name in out} | {f"p@{k}", f"r@{k}"}  # = precision@k, recall@k
            out.update({name: v for name, v in extra.items() if name.lower() not in taken})
    return {f"{prefix}{name}": value for name, value in out.items()}


def align_scores(records: Sequence[QueryRecord], scores) -> list[np.ndarray]:
    """Per-record score arrays in passage order, from a list of arrays or ``{qid: {pid: score}}``."""
    if isinstance(scores, Mapping):
        out = []
        for r in records:
            per = scores[r.qid]
            out.append(np.array([float(per[p.pid]) for p in r.passages]))
        return out
    out = [np.asarray(s, dtype=np.float64) for s in scores]
    if len(out) != len(records):
        raise ValueError(f"{len(records)} records but {len(out)} score lists")
    for r, s in zip(records, out):
        if s.shape != (len(r.passages),):
            raise ValueError(f"query {r.qid!r}: {len(r.passages)} passages but {s.shape} scores")
    return out


def ideal_from_records(records: Sequence[QueryRecord]) -> tuple[np.ndarray, np.ndarray] | None:
    """Ideal-gain rows of the whole judged pool, when records carry it (TREC qrels), else None.

    Read from ``record.extra["judged_grades"]`` (``{"grade": count}`` over all qrels of the query,
    as :mod:`udcg_ltr.data.readers.trec` writes it) or ``record.extra["qrels"]`` (``{pid: grade}``).
    A record with neither falls back to its own passages' labels
    (:func:`udcg_ltr.data.padded.judged_pools`, which also gives R and the unjudged queries).
    """
    pools = judged_pools(records)
    if not pools.from_qrels.any():
        return None
    return pools.ideal_gains, pools.ideal_mask


def _scored_slates(records: Sequence[QueryRecord], scores, llm: str | None, relevance_threshold: int):
    """``(aligned per-record scores, padded slates in passage order, [Q, W] scores with -inf at padding)``."""
    aligned = align_scores(records, scores)
    slates = pad_records(records, llm=llm, relevance_threshold=relevance_threshold, order="given",
                         selector_features=False)
    padded = np.full(slates.shape, -np.inf)
    for i, s in enumerate(aligned):
        padded[i, :len(s)] = s
    return aligned, slates, padded


def evaluate_reranker(records: Sequence[QueryRecord], scores, llm: str | None, k: int = 5, *,
                      gamma: float = DEFAULT_GAMMA, relevance_threshold: int = 1, scorer: Any = None,
                      match_rule: str = "contains", prefix: str = "", ties: str = "stable") -> dict[str, float]:
    """Score each query's top-k by ``scores`` with the metric table (and end to end given ``scorer``).

    ``scores``: per-record arrays aligned with ``record.passages`` or ``{qid: {pid: score}}``.
    ``llm`` names the utility annotations (None: relevance metrics only). R and nDCG's ideal come
    from each query's judged pool (the qrels when records carry them); a query the qrels do not
    judge is left out of the relevance metrics and counted in ``unjudged_queries`` (records with
    qrels only). ``ties="trec"`` breaks equal scores by passage id descending, as trec_eval. With
    ``scorer`` (an :class:`udcg_ltr.annotate.LLMScorer`), each top-k context (rank order = prompt
    order) is answered by the LLM and graded: ``correct_rate``, ``abstained_rate``, ``wrong_rate``.
    """
    aligned, slates, padded_scores = _scored_slates(records, scores, llm, relevance_threshold)
    qrels = judged_pools(records, relevance_threshold).from_qrels.any()
    retrieval = np.where(slates.mask, slates.retrieval_score, 0.0)
    out = slate_metrics(np.where(slates.mask, padded_scores, 0.0), k=k,
                        utility=slates.utility if llm is not None else None, graded=slates.relevance,
                        mask=slates.mask, relevance_threshold=relevance_threshold, n_relevant=slates.n_relevant,
                        ideal_gains=slates.ideal_gains, ideal_mask=slates.ideal_mask, gamma=gamma,
                        retrieval_scores=retrieval if np.isfinite(retrieval).all() else None,
                        judged=slates.judged if qrels else None, ties=ties, ids=slates.pids)
    if scorer is not None:
        out.update(end_to_end(records, aligned, scorer, k=k, relevance_threshold=relevance_threshold,
                              match_rule=match_rule))
    out["n_queries"] = float(len(records))
    return {f"{prefix}{name}": value for name, value in out.items()}


def per_query_udcg(records: Sequence[QueryRecord], scores, llm: str, k: int = 5, *,
                    gamma: float = DEFAULT_GAMMA, relevance_threshold: int = 1) -> np.ndarray:
    """``[Q]`` UDCG@k (Eq. 4) of each query's top-k by ``scores``: the values ``udcg@k`` averages.

    The same ranking (ties: earlier passage first) and utilities (Eq. 2) as :func:`evaluate_reranker`,
    kept per query for paired comparisons of two rankers
    (:func:`udcg_ltr.analysis.bootstrap.paired_bootstrap_test`).
    """
    _, slates, padded = _scored_slates(records, scores, llm, relevance_threshold)
    order = M.rank_by_scores(np.where(slates.mask, padded, 0.0), slates.mask)
    return np.asarray(M.udcg(M.take_ranked(slates.utility, order), M.take_ranked(slates.mask, order), k=k,
                             gamma=gamma), dtype=np.float64)


def top_k_contexts(records: Sequence[QueryRecord], scores, k: int) -> list[list[str]]:
    """Passage ids of each query's top k by score (stable ties), in rank order."""
    out = []
    for r, s in zip(records, align_scores(records, scores)):
        order = np.argsort(-s, kind="stable")[:k]
        out.append([r.passages[i].pid for i in order])
    return out


def end_to_end(records: Sequence[QueryRecord], scores, scorer: Any, *, k: int, relevance_threshold: int = 1,
               match_rule: str = "contains") -> dict[str, float]:
    """Correct / abstained / wrong rates (and context length) of the LLM answering each query's top-k context
    (:func:`udcg_ltr.select.evaluation.end_to_end_selection` with a fixed k)."""
    from udcg_ltr.select.evaluation import end_to_end_selection

    out = end_to_end_selection(records, top_k_contexts(records, scores, k), scorer,
                               relevance_threshold=relevance_threshold, match_rule=match_rule)
    return {key: v for key, v in out.items() if isinstance(v, float)}
