"""The metric table: every per-query metric of the library for one ranking, and its summary.

:func:`metric_table` takes a :class:`udcg_ltr.data.padded.PaddedSlates` (or any object with its
attributes) in ranked order (``slates.reorder(rank_by_scores(scores, slates.mask))``) and/or explicit
arrays that override its fields (:class:`RankedRows`, :class:`JudgedPool`); :class:`MetricOptions` says what to
compute. Its columns are :data:`METRIC_NAMES` keys with the cutoff (``ndcg@10``):

======================  =====================================================================
``udcg@k``              Eq. 4 over LLM utilities (when utilities are available)
``udcg_theta@k``        Eq. 3 with the given positional weights ``alpha``, ``beta``
``ndcg@k``              graded gains (the labels), ideal from the query's judged pool (every qrel)
``mrr@k`` ``map@k``     reciprocal rank; average precision over ``n_relevant`` (R of the judged pool)
``precision@k``         precision (divided by k) and recall (over ``n_relevant``): ``recall@k``
``hits@k``              a relevant passage in the top k
``erag@k``              eRAG Precision@k over the given per-passage downstream labels
``ra_nwg@k`` ...        RA-nWG, PROC, %PROC, N-Recall4+, N-Recall5, Precision4+, Harm over graded labels
``da_dcg@k``            distractor-aware DCG over heuristic utilities (labels, retriever scores,
                        known distractors), with ``da_harm@k`` and ``distractor_rate@k``
======================  =====================================================================

A query whose qrels judge nothing (``judged`` False) is NA in every column that reads relevance (all but
``erag@k``), as trec_eval drops such queries; :func:`trec_table` is trec_eval on full rankings, same keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from udcg_ltr.metrics import classic, distractor, setbased
from udcg_ltr.metrics._common import MeanResult, as_padded, mean
from udcg_ltr.metrics.erag import erag, graded_precision
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA, udcg, udcg_theta

# The one spelling of every metric (as ranx writes them: lower case, ``key@k`` with a cutoff), used by the
# table, validation (``val/udcg@5``), reports, plots, W&B and benches; the value is the display name.
METRIC_NAMES: dict[str, str] = {
    "udcg": "UDCG", "udcg_theta": "UDCG_theta", "ndcg": "nDCG", "mrr": "MRR", "map": "MAP",
    "precision": "P", "recall": "R", "hits": "HITS", "erag": "eRAG", "utility": "mean utility",
    "ra_nwg": "RA-nWG", "proc": "PROC", "pct_proc": "%PROC", "n_recall_4plus": "N-Recall4+",
    "n_recall_5": "N-Recall5", "precision_4plus": "Precision4+", "harm": "Harm",
    "da_dcg": "DA-DCG", "da_harm": "DA-harm", "distractor_rate": "distractor rate"}


def metric_key(name: str, k: int | None = None) -> str:
    """The key of metric ``name`` (a :data:`METRIC_NAMES` key) at cutoff ``k``: ``ndcg@10``, uncut ``ndcg``."""
    if name not in METRIC_NAMES:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRIC_NAMES)}")
    return name if k is None else f"{name}@{k}"


def display_name(key: str) -> str:
    """A key's display name for readers (plot legends): ``ndcg@5`` -> ``nDCG@5``; other keys unchanged."""
    name, at, cut = key.partition("@")
    return METRIC_NAMES.get(name, name) + at + cut


@dataclass(frozen=True)
class MetricOptions:
    """What the table computes, whatever the rows: the cutoff ``k`` (None: uncut), Eq. 4's ``gamma``,
    UDCG_theta's positional weights ``alpha`` / ``beta`` (both or neither: they add ``udcg_theta@k``) and the
    ``da_*`` metrics' ``heuristic`` (None: :func:`.distractor.default_heuristic` of the retrieval scores)."""

    k: int | None = 10
    gamma: float = DEFAULT_GAMMA
    alpha: Any = None
    beta: Any = None
    heuristic: distractor.HeuristicConfig | None = None

    def __post_init__(self) -> None:
        if (self.alpha is None) != (self.beta is None):
            raise ValueError(f"alpha and beta go together (UDCG_theta): got alpha={self.alpha!r}, beta={self.beta!r}")


@dataclass(frozen=True)
class RankedRows:
    """``[Q, W]`` arrays in ranked order, each overriding the slates' field of that meaning: ``mask`` (real
    entries), ``relevant`` (binary labels), ``gains`` (nDCG's; default ``relevance``, else ``relevant``),
    ``utilities`` (Eq. 2; default ``slates.utility`` when ``p_no_response`` is annotated), ``scores``
    (``retrieval_score``) and ``is_distractor`` (utility -1 in the ``da_*`` metrics)."""

    mask: Any = None
    relevant: Any = None
    gains: Any = None
    utilities: Any = None
    scores: Any = None
    is_distractor: Any = None


@dataclass(frozen=True)
class JudgedPool:
    """Each query's judged pool (:func:`udcg_ltr.data.padded.judged_pools`), overriding the slates' fields:
    ``n_relevant`` (R; default the count in the row), ``ideal_gains`` / ``ideal_mask`` (nDCG's ideal; default
    the row) and ``judged`` (bool per query; False rows are NA in every column that reads relevance)."""

    n_relevant: Any = None
    ideal_gains: Any = None
    ideal_mask: Any = None
    judged: Any = None


@dataclass(frozen=True)
class GradedLabels:
    """Graded labels 0..5 that add the set-based family (RA-nWG, PROC, N-Recall, Harm): ``grades`` in ranked
    order (``True``: the slates' ``relevance``), their ``mask`` (default the rows'), and the judged pool's
    grades ``pool`` / ``pool_mask`` (default the row)."""

    grades: Any = True
    mask: Any = None
    pool: Any = None
    pool_mask: Any = None


@dataclass(frozen=True)
class ERAGLabels:
    """Per-passage downstream scores in [0, 1] (NaN = absent) that add ``erag@k``, and their ``mask``."""

    labels: Any
    mask: Any = None


def _pick(value, slates, name: str):
    """An explicit argument, else the field ``name`` of ``slates`` (None when neither is there)."""
    return value if value is not None else getattr(slates, name, None)


def _binary_ideal(n_relevant: np.ndarray, k: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Ideal gains of a binary pool with ``n_relevant`` relevant passages: ones, as a padded array."""
    n = np.asarray(n_relevant, dtype=np.float64).reshape(-1)
    w = max(int(np.nanmax(n, initial=0)), 1)
    if k is not None:
        w = min(w, max(k, 1))
    ideal_mask = np.arange(w)[None, :] < n[:, None]
    return ideal_mask.astype(np.float64), ideal_mask


def _ideal(gains, rel, m, ideal_gains, ideal_mask, slates, n_relevant, k):
    """The judged pool nDCG normalises by: explicit, the slates', ``n_relevant`` ones when the gains are the
    binary labels themselves (R then describes the same pool), else the row itself."""
    if ideal_gains is not None:
        return ideal_gains, ideal_mask
    if getattr(slates, "ideal_gains", None) is not None:
        return slates.ideal_gains, slates.ideal_mask
    if n_relevant is not None and np.array_equal(gains[m], rel[m].astype(np.float64)):
        return _binary_ideal(n_relevant, k)
    return gains, m


def metric_table(slates=None, *, options: MetricOptions | None = None, rows: RankedRows | None = None,
                 pool: JudgedPool | None = None, graded: GradedLabels | None = None,
                 erag_labels: ERAGLabels | None = None) -> dict[str, np.ndarray]:
    """Per-query metrics (``dict[name, float64 [n_queries]]``) for rows in ranked order.

    ``options``: what to compute (:class:`MetricOptions`; default cutoff 10). ``rows`` (:class:`RankedRows`)
    and ``pool`` (:class:`JudgedPool`) override the ``slates`` fields of their meaning, field by field;
    ``graded`` adds the set-based family, ``erag_labels`` adds ``erag@k``.
    """
    options, rows, pool = options or MetricOptions(), rows or RankedRows(), pool or JudgedPool()
    k = options.k
    rel = _pick(rows.relevant, slates, "relevant")
    if rel is None:
        raise ValueError("metric_table needs binary relevance: pass slates or rows=RankedRows(relevant=...)")
    rel, m = as_padded(rel, _pick(rows.mask, slates, "mask"), dtype=None, what="relevant")
    rel = rel.astype(bool) & m
    n_rel = _pick(pool.n_relevant, slates, "n_relevant")  # None: classic counts R in the row
    g = _pick(rows.gains, slates, "relevance")
    g = rel.astype(np.float64) if g is None else as_padded(g, m, what="gains")[0]
    ok = _pick(pool.judged, slates, "judged")
    ok = np.ones(rel.shape[0], dtype=bool) if ok is None else np.asarray(ok, dtype=bool).reshape(-1)
    out: dict[str, np.ndarray] = {}

    def key(name: str) -> str:
        return metric_key(name, k)

    u = rows.utilities
    if u is None and slates is not None:
        pnr = getattr(slates, "p_no_response", None)
        if pnr is not None and np.isfinite(np.where(m, pnr, 0.0)).all() and m.any():
            u = slates.utility
    if u is not None:
        out[key("udcg")] = udcg(u, m, k=k, gamma=options.gamma)
        if options.alpha is not None:
            out[key("udcg_theta")] = udcg_theta(u, options.alpha, options.beta, m, k=k)

    ideal, ideal_m = _ideal(g, rel, m, pool.ideal_gains, pool.ideal_mask, slates, n_rel, k)
    out[key("ndcg")] = classic.ndcg(g, m, k=k, ideal_gains=ideal, ideal_mask=ideal_m)
    out[key("mrr")] = classic.reciprocal_rank(rel, m, k=k)
    out[key("map")] = classic.average_precision(rel, m, k=k, n_relevant=n_rel)
    out[key("precision")] = classic.precision(rel, m, k=k)
    out[key("recall")] = classic.recall(rel, m, k=k, n_relevant=n_rel)
    out[key("hits")] = classic.hits(rel, m, k=k)

    if graded is not None:
        gr = getattr(slates, "relevance", None) if graded.grades is True else graded.grades
        gm = graded.mask if graded.mask is not None else m
        pool_kw = dict(pool_grades=graded.pool, pool_mask=graded.pool_mask)
        for name in ("ra_nwg", "proc", "pct_proc", "n_recall_4plus", "n_recall_5"):
            out[key(name)] = getattr(setbased, name)(gr, gm, k=k, **pool_kw)
        out[key("precision_4plus")] = setbased.precision_4plus(gr, gm, k=k)
        out[key("harm")] = setbased.harm_at_k(gr, gm, k=k)

    s = _pick(rows.scores, slates, "retrieval_score")
    dis = _pick(rows.is_distractor, slates, "is_distractor")
    config = options.heuristic if options.heuristic is not None else distractor.default_heuristic(s, m)
    h = distractor.heuristic_utilities(rel, s, m, is_distractor=dis, config=config)
    out[key("da_dcg")] = distractor.distractor_aware_dcg(h, m, k=k)
    out[key("da_harm")] = distractor.distractor_harm(h, m, k=k)
    out[key("distractor_rate")] = distractor.distractor_rate(h, m, k=k)

    if not ok.all():  # unjudged queries: NA wherever relevance is read (trec_eval drops them)
        out = {name: np.where(ok, v, np.nan) for name, v in out.items()}
    if erag_labels is not None:  # downstream labels, not relevance: defined for unjudged queries too
        out[key("erag")] = erag(graded_precision, erag_labels.labels, erag_labels.mask, k=k)
    return out


def trec_measure(column: str) -> str:
    """trec_eval's name for a :func:`trec_table` column: ``ndcg@10`` -> ``ndcg_cut_10``, ``map`` -> ``map``,
    ``mrr@c`` -> ``recip_rank@c`` (trec_eval's ``recip_rank`` on the run cut to its top c per query)."""
    name, _, cut = column.partition("@")
    base = {"ndcg": ("ndcg", "ndcg_cut_"), "map": ("map", "map_cut_"), "precision": (None, "P_"),
            "recall": ("set_recall", "recall_"), "mrr": ("recip_rank", "recip_rank@")}
    if name not in base or (not cut and base[name][0] is None):
        raise KeyError(f"not a trec_table column: {column!r}")
    full, prefix = base[name]
    return f"{prefix}{cut}" if cut else full


def trec_table(gains, mask=None, *, ideal_gains=None, ideal_mask=None, n_relevant=None, judged=None,
               threshold: float = 1, cutoffs=(5, 10)) -> dict[str, np.ndarray]:
    """trec_eval's measures per query for full rankings in ranked order (``[Q, W]`` grades, column 0 = rank 1).

    trec_eval's definitions (``-l threshold`` for the binary ones): grades <= 0 carry no gain; ``R``
    (``n_relevant``) and the ideal (``ideal_gains``) come from the qrels, retrieved or not (default: the
    row). Columns ``ndcg`` ``map`` ``precision`` (cut only) ``recall`` ``mrr``, at every cutoff ``c``
    and uncut; queries with ``judged`` False are NA (trec_eval leaves them out of its averages).
    """
    g, m = as_padded(gains, mask)
    g = np.where(g > 0, g, 0.0)  # trec_eval: only positive grades are gains
    rel = m & (g >= threshold)
    if ideal_gains is None:
        ideal_gains, ideal_mask = g, m
    else:
        ideal_gains, ideal_mask = as_padded(ideal_gains, ideal_mask, what="ideal_gains")
        ideal_mask = ideal_mask & (ideal_gains > 0)
        ideal_gains = np.where(ideal_mask, ideal_gains, 0.0)
    out: dict[str, np.ndarray] = {}
    for c in (*sorted(set(int(c) for c in cutoffs)), None):
        out[metric_key("ndcg", c)] = classic.ndcg(g, m, k=c, ideal_gains=ideal_gains, ideal_mask=ideal_mask)
        out[metric_key("map", c)] = classic.average_precision(rel, m, k=c, n_relevant=n_relevant)
        if c is not None:
            out[metric_key("precision", c)] = classic.precision(rel, m, k=c)
        out[metric_key("recall", c)] = classic.recall(rel, m, k=c, n_relevant=n_relevant)
        out[metric_key("mrr", c)] = classic.reciprocal_rank(rel, m, k=c)
    if judged is not None:
        ok = np.asarray(judged, dtype=bool).reshape(-1)
        out = {name: np.where(ok, v, np.nan) for name, v in out.items()}
    return out


def summarize(table: dict[str, np.ndarray]) -> dict[str, MeanResult]:
    """Mean of every column, NA (NaN) left out and counted (:func:`udcg_ltr.metrics.mean`)."""
    return {name: mean(values) for name, values in table.items()}

