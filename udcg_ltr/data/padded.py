"""From :class:`QueryRecord` lists to the padded ``[n_queries, k]`` arrays the metrics consume.

The judged pool of a query (:func:`judged_pools`) is what recall-style metrics and nDCG's ideal
divide by. With TREC-style judgements (``record.extra["judged_grades"]``, ``{"grade": count}``, or
``record.extra["qrels"]``, ``{pid: grade}``) it is the qrels, retrieved or not, as trec_eval reads them:
``R`` = judged passages with ``grade >= relevance_threshold`` (trec_eval ``-l``), the ideal = every
positive grade, and a query without any judgement is *unjudged* (callers leave it out and report the
count). Without qrels the record's own passages are the pool and every query is judged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from udcg_ltr.data.lexical import LEXICAL_FEATURES, lexical_features, records_idf
from udcg_ltr.data.probes import ANSWER_PROBES, answer_probes
from udcg_ltr.data.schema import Passage, QueryRecord


@dataclass
class PaddedSlates:
    """Aligned ``[n_queries, width]`` arrays, one row per query. ``probes``: label-free per-passage signals
    that selectors read as ``extra_features`` (:mod:`udcg_ltr.data.lexical` and, when every passage has
    the LLM's ``answer_alone``, :mod:`udcg_ltr.data.probes`)."""

    qids: list[str]
    pids: np.ndarray  # object [Q, W], "" for padding
    mask: np.ndarray  # bool [Q, W]
    relevance: np.ndarray  # float [Q, W], the raw labels (0 when unlabelled)
    relevant: np.ndarray  # bool [Q, W], binarised
    retrieval_score: np.ndarray  # float [Q, W], -inf for missing
    retrieval_rank: np.ndarray  # int [Q, W], 0 for missing
    p_no_response: np.ndarray  # float [Q, W] (NaN when not annotated)
    utility: np.ndarray  # float [Q, W], Eq. 2 (0 for padding or no LLM)
    is_distractor: np.ndarray  # bool [Q, W]
    n_relevant: np.ndarray = field(default=None)  # float [Q]: relevant passages in the judged pool (R)
    probes: dict[str, np.ndarray] = field(default_factory=dict)  # float [Q, W] each, 0 for padding
    ideal_gains: np.ndarray | None = None  # float [Q, P]: the judged pool's positive grades, descending
    ideal_mask: np.ndarray | None = None  # bool [Q, P]
    judged: np.ndarray | None = None  # bool [Q]: False for a query whose qrels judge nothing (drop it)

    @property
    def shape(self) -> tuple[int, int]:
        return self.mask.shape

    def reorder(self, order: np.ndarray) -> PaddedSlates:
        """Permute the columns of every row (e.g. by a reranker's scores, via ``rank_by_scores``)."""
        take = lambda a: np.take_along_axis(a, order, axis=1)  # noqa: E731
        return replace(self, qids=list(self.qids), probes={name: take(v) for name, v in self.probes.items()},
                       **{name: take(getattr(self, name)) for name in _COLUMN_FIELDS})


#: The ``[Q, W]`` fields of :class:`PaddedSlates` (one column per passage), besides ``probes``.
_COLUMN_FIELDS = ("pids", "mask", "relevance", "relevant", "retrieval_score", "retrieval_rank", "p_no_response",
                  "utility", "is_distractor")


@dataclass
class JudgedPools:
    """The judged pool of each query (module doc): ``R``, the graded ideal and whether it is judged at all."""

    n_relevant: np.ndarray  # float [Q]: judged passages with grade >= relevance_threshold
    ideal_gains: np.ndarray  # float [Q, P]: positive grades of the pool, descending, 0 for padding
    ideal_mask: np.ndarray  # bool [Q, P]
    judged: np.ndarray  # bool [Q]: False when the query's qrels hold no judgement
    from_qrels: np.ndarray  # bool [Q]: the pool comes from qrels (TREC), not from the record's passages

    @property
    def n_unjudged(self) -> int:
        return int((~self.judged).sum())


def pad_scores(scores, width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-row 1-D arrays (scores, grades) -> padded ``[Q, width]`` float array (0 at padding) and its mask."""
    rows = [np.asarray(s, dtype=np.float64).reshape(-1)[:width] for s in scores]
    w = width if width is not None else max(map(len, rows), default=0)
    mask = np.arange(w) < np.array([len(r) for r in rows], dtype=np.int64)[:, None]
    out = np.zeros(mask.shape)
    out[mask] = np.concatenate([*rows, np.zeros(0)])  # row-major: each row's values fill its prefix
    return out, mask


def qrels_grades(record: QueryRecord) -> list[int] | None:
    """Every judged grade of the query from its qrels facts (module doc), or None when the record has none."""
    if isinstance(counts := record.extra.get("judged_grades"), Mapping):
        return [int(g) for g, c in counts.items() for _ in range(int(c))]
    if isinstance(qrels := record.extra.get("qrels"), Mapping):
        return [int(g) for g in qrels.values()]
    return None


def judged_pools(records: Sequence[QueryRecord], relevance_threshold: int = 1) -> JudgedPools:
    """:class:`JudgedPools` of ``records``: from their qrels, else from their passages. Only positive grades
    enter the ideal rows (trec_eval's ``ndcg``: grades <= 0 carry no gain)."""
    qrels = [qrels_grades(rec) for rec in records]
    grades = [[p.relevance for p in rec.passages if p.relevance is not None] if g is None else g
              for g, rec in zip(qrels, records)]
    ideal, ideal_mask = pad_scores([sorted((float(g) for g in gs if g > 0), reverse=True) for gs in grades])
    n_relevant = np.array([sum(g >= relevance_threshold for g in gs) for gs in grades], dtype=float)
    judged = np.array([g is None or len(g) > 0 for g in qrels], dtype=bool)
    return JudgedPools(n_relevant=n_relevant, ideal_gains=ideal, ideal_mask=ideal_mask, judged=judged,
                       from_qrels=np.array([g is not None for g in qrels], dtype=bool))


def pad_records(records: Sequence[QueryRecord], *, llm: str | None = None, width: int | None = None,
                relevance_threshold: int = 1, order: str = "given",
                idf: Mapping[str, float] | None = None, selector_features: bool = True) -> PaddedSlates:
    """Stack records into padded arrays; ``order="retrieval"`` sorts each pool by retrieval rank (then
    score, then input order). Utilities follow Eq. 2 with the annotations of ``llm`` (required when given).
    The lexical features use ``idf`` (default: :func:`~udcg_ltr.data.lexical.records_idf` of ``records``;
    pass one corpus's idf to every split so that they agree). ``selector_features=False`` skips all
    ``probes`` (most of the time) for callers that only compute metrics."""
    if order not in ("given", "retrieval"):
        raise ValueError(f"order must be 'given' or 'retrieval', got {order!r}")
    n = len(records)
    w = width if width is not None else max((len(r.passages) for r in records), default=0)
    ordered = [list(r.passages) for r in records]
    if order == "retrieval":  # by rank, then score descending, then input order (the sort is stable)
        for passages in ordered:
            passages.sort(key=lambda p: (p.rank if p.rank is not None else np.inf,
                                         -(p.score if p.score is not None else -np.inf)))
    answers = selector_features and llm is not None and n > 0 and all(
        isinstance(p.annotations.get(llm, {}).get("answer_alone"), str) for r in records for p in r.passages)
    lexical = LEXICAL_FEATURES if selector_features else ()
    probes = {name: np.zeros((n, w)) for name in (*lexical, *(ANSWER_PROBES if answers else ()))}
    if lexical and idf is None:
        idf = records_idf(records)
    for i, (rec, passages) in enumerate(zip(records, ordered)):
        if lexical:
            for name, values in lexical_features(rec.question, [p.text for p in passages[:w]], idf).items():
                probes[name][i, :len(values)] = values
        if answers:  # over the whole pool (agreement counts every candidate), then cut to the width
            pool = answer_probes([p.text for p in passages], [p.annotations[llm]["answer_alone"] for p in passages])
            for name, values in pool.items():
                probes[name][i, :min(w, len(values))] = values[:w]

    def column(value: Callable[[Passage], Any], fill: Any, dtype: Any = float, known: bool = True):
        """``[n, w]``: ``value(p)`` of each passage within the width (when ``known``), else ``fill``."""
        out = np.full((n, w), fill, dtype=dtype)
        for i, passages in enumerate(ordered if known else ()):
            out[i, :len(passages[:w])] = [value(p) for p in passages[:w]]
        return out

    pools = judged_pools(records, relevance_threshold)
    return PaddedSlates(qids=[r.qid for r in records], pids=column(lambda p: p.pid, "", object),
                        mask=column(lambda p: True, False, bool), relevance=column(lambda p: p.relevance or 0, 0.0),
                        relevant=column(lambda p: p.is_relevant(relevance_threshold), False, bool),
                        retrieval_score=column(lambda p: -np.inf if p.score is None else p.score, -np.inf),
                        retrieval_rank=column(lambda p: p.rank or 0, 0, np.int64),
                        p_no_response=column(lambda p: p.p_no_response(llm), np.nan, known=llm is not None),
                        utility=column(lambda p: p.utility(llm, relevance_threshold), 0.0, known=llm is not None),
                        is_distractor=column(lambda p: bool(p.is_distractor), False, bool), n_relevant=pools.n_relevant,
                        probes=probes, ideal_gains=pools.ideal_gains, ideal_mask=pools.ideal_mask, judged=pools.judged)
