"""Classic rank metrics over padded ``[n_queries, k]`` arrays in ranked order (column 0 = rank 1).

Graded or signed gains are used as given (no clamping); the binary metrics call an entry relevant
when its label is ``> 0``, or ``>= threshold`` when a threshold is given (TREC DL: ``threshold=2``).

* DCG@k  = sum_{i<=k} g_i * d_i, with ``d_i = 1/log2(i+1)`` (``discount="log2"``, Jarvelin and
  Kekalainen 2002, linear gains as trec_eval and ranx's ``ndcg``) or 1 (``None``);
* nDCG@k = DCG@k / IDCG@k, IDCG from the ideal order of the query's judged pool (``ideal_gains``,
  default: the row itself); a query whose pool has no positive gain gets ``undefined`` (0 by
  default, as trec_eval, ranx and scikit-learn do). With non-negative gains this is exactly
  trec_eval's ``ndcg_cut`` (gains = grades, linear, only positive gains enter the ideal).
  Signed gains (utilities): DCG has a maximum ``Z+`` (the pool's positive gains in descending
  order, negatives left out) and a minimum ``Z-`` (its negative gains, most negative first) over
  every ranking of at most k entries of the pool, so nDCG@k = DCG/Z+ when DCG > 0 and DCG/|Z-|
  when DCG < 0: it lies in [-1, 1], 1 for the ideal, -1 for the worst ranking, 0 neutral. This is
  the two-sided form of the min-max normalisation that Gienapp, Stein, Hagen and Potthast ("The
  Impact of Negative Relevance Judgments on NDCG", CIKM 2020) show signed gains need (plain
  DCG/IDCG is unbounded below and can exceed 1); it reduces to the classic value when no gain is
  negative. A row whose DCG leaves ``[Z-, Z+]`` was ranked from gains the pool does not hold:
  ``ValueError``, never a value outside the bound;
* RR@k = 1 / rank of the first relevant entry in the top k (0 if none); MRR is its mean;
* AP@k = (1/R) sum_{i<=k, rel_i} Precision@i, where R is the number of relevant judged passages
  (``n_relevant``; default the count in the row), as trec_eval and ranx define it;
* Precision@k = #relevant in top k / k (k fixed, as trec_eval); Recall@k = #relevant in top k / R;
  HITS@k = 1 if any relevant entry is in the top k.

Every function takes ``(values, mask=None, *, k=None, ...)`` and returns a float64 ``[n_queries]``
array. With ``mask=None`` the cutoff is a column slice, so only the first ``k`` columns are read.
"""

from __future__ import annotations

import numpy as np

from udcg_ltr.metrics._common import (
    _as_mask,
    check_not_nan,
    column_positions,
    log2_discounts,
    n_real,
    prepare,
)


def _discount_table(n: int, discount: str | None) -> np.ndarray:
    if discount is None:
        return np.ones(n)
    if discount != "log2":
        raise ValueError(f"unknown discount {discount!r} (use 'log2' or None)")
    return log2_discounts(n)


def dcg(gains, mask=None, *, k: int | None = None, discount: str | None = "log2") -> np.ndarray:
    """DCG@k = sum_{i<=k} g_i / log2(i + 1) with graded or signed gains, per query."""
    g, m = prepare(gains, mask, k, dtype=np.float64)
    table = _discount_table(g.shape[1], discount)
    if m is None:
        return g @ table
    d = table[np.clip(column_positions(g, m), 0, None)]
    return np.where(m, g * d, 0.0).sum(axis=1)


def ideal_dcg(gains, mask=None, *, k: int | None = None, discount: str | None = "log2") -> np.ndarray:
    """DCG@k of the ideal order (descending gain; negatives go last, so they only count if k forces them)."""
    g, _ = prepare(gains, mask, None, dtype=np.float64)
    if mask is None:
        return dcg(-np.sort(-g, axis=1), None, k=k, discount=discount)
    m = _as_mask(mask, g.shape)
    ideal = -np.sort(np.where(m, -g, np.inf), axis=1)  # descending; padding (-inf) last
    ideal_mask = np.sort(~m, axis=1) == 0  # as many leading real slots as real entries
    return dcg(np.where(ideal_mask, ideal, 0.0), ideal_mask, k=k, discount=discount)


def dcg_bounds(gains, mask=None, *, k: int | None = None, discount: str | None = "log2") -> tuple[np.ndarray, np.ndarray]:
    """``(Z-, Z+)``: the least and the largest DCG@k of any ranking of at most ``k`` entries of the pool.

    ``Z+`` ranks the positive gains in descending order and leaves the rest out; ``Z-`` ranks the
    negative gains, most negative first (rearrangement inequality: the discount decreases with rank).
    """
    g, m = prepare(gains, mask, None, dtype=np.float64)
    real = np.ones(g.shape, bool) if m is None else m
    if not (real & (g < 0)).any():  # non-negative gains (every TREC pool): Z- = 0, Z+ = IDCG
        return np.zeros(g.shape[0]), ideal_dcg(g, m, k=k, discount=discount)
    upper = ideal_dcg(np.where(real & (g > 0), g, 0.0), real & (g > 0), k=k, discount=discount)
    lower = -ideal_dcg(np.where(real & (g < 0), -g, 0.0), real & (g < 0), k=k, discount=discount)
    return lower, upper


def ndcg(gains, mask=None, *, k: int | None = None, ideal_gains=None, ideal_mask=None,
         discount: str | None = "log2", undefined: float = 0.0) -> np.ndarray:
    """nDCG@k per query in [-1, 1]: DCG/Z+ when DCG > 0, DCG/|Z-| when DCG < 0 (module doc, Gienapp et al. 2020).

    ``ideal_gains``/``ideal_mask`` describe the query's whole judged pool (e.g. every qrel, retrieved
    or not: trec_eval's ideal); by default the row itself is its own pool. With non-negative gains
    this is DCG@k / IDCG@k (trec_eval ``ndcg_cut``). ``undefined`` where the pool has no non-zero
    gain (0 by default, as trec_eval). ``ValueError`` when the row's DCG lies outside what the pool
    allows (its gains are not the pool's: e.g. graded gains against a binary ideal).
    """
    actual = dcg(gains, mask, k=k, discount=discount)
    if ideal_gains is None:
        ideal_gains, ideal_mask = gains, mask
    lower, upper = dcg_bounds(ideal_gains, ideal_mask, k=k, discount=discount)
    tol = 1e-9 * np.maximum(np.maximum(upper, -lower), 1.0)
    bad = (actual > upper + tol) | (actual < lower - tol)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"nDCG: query {i} has DCG {actual[i]:.6g} outside [{lower[i]:.6g}, {upper[i]:.6g}], the "
                         "range its judged pool allows; ideal_gains must hold every gain of the ranked row")
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # the branch not taken may divide by 0
        out = np.where(actual > 0, actual / upper, actual / -lower)
    out = np.clip(np.where(actual == 0, 0.0, out), -1.0, 1.0)  # clip: the tolerance above, nothing more
    return np.where((upper > 0) | (lower < 0), out, undefined)


def _binary(labels, mask, k, threshold) -> tuple[np.ndarray, np.ndarray | None]:
    y, m = prepare(labels, mask, k)
    if y.dtype == bool and threshold is None:
        rel = y
    else:
        rel = (y >= threshold) if threshold is not None else (y > 0)
    if m is not None:
        rel = rel & m
    return rel, m


def _n_relevant(labels, mask, threshold, n_relevant) -> np.ndarray:
    if n_relevant is not None:
        total = np.asarray(n_relevant, dtype=np.float64).reshape(-1)
        check_not_nan(total, None, "n_relevant")
        return total
    rel, _ = _binary(labels, mask, None, threshold)
    return rel.sum(axis=1).astype(np.float64)


def reciprocal_rank(labels, mask=None, *, k: int | None = None, threshold: float | None = None) -> np.ndarray:
    """RR@k: 1 / rank of the first relevant entry within the top k, 0 if there is none."""
    rel, m = _binary(labels, mask, k, threshold)
    first_col = rel.argmax(axis=1)  # first True column (0 when none, masked below)
    found = rel[np.arange(rel.shape[0]), first_col] if rel.shape[1] else np.zeros(rel.shape[0], bool)
    if m is None:
        rank = first_col + 1.0
    else:
        rank = np.take_along_axis(np.cumsum(m, axis=1), first_col[:, None], axis=1)[:, 0].astype(np.float64)
    return np.where(found, 1.0 / np.maximum(rank, 1.0), 0.0)


mrr = reciprocal_rank  # per-query values; MRR is their mean (metrics.mean)


def average_precision(labels, mask=None, *, k: int | None = None, threshold: float | None = None,
                      n_relevant=None) -> np.ndarray:
    """AP@k = (1/R) * sum over relevant ranks i <= k of Precision@i (0 when R = 0)."""
    rel, m = _binary(labels, mask, k, threshold)
    # Precision@i at each hit = (hits so far) / rank, evaluated on the hits only: in row-major
    # order the j-th hit of a row has j hits so far, so no [Q, k] cumsum or division is needed.
    rows, cols = np.nonzero(rel)
    per_row = np.bincount(rows, minlength=rel.shape[0])
    first = np.cumsum(per_row) - per_row
    hits_so_far = np.arange(rows.size) - first[rows] + 1.0
    rank = cols + 1.0 if m is None else np.cumsum(m, axis=1)[rows, cols].astype(np.float64)
    prec_sum = np.bincount(rows, weights=hits_so_far / rank, minlength=rel.shape[0])
    total = _n_relevant(labels, mask, threshold, n_relevant)
    with np.errstate(invalid="ignore", divide="ignore"):
        ap = prec_sum / total
    return np.where(total > 0, ap, 0.0)


def precision(labels, mask=None, *, k: int | None = None, threshold: float | None = None) -> np.ndarray:
    """Precision@k = #relevant in the top k / k (``k=None``: over each row's real entries)."""
    rel, m = _binary(labels, mask, k, threshold)
    hits = rel.sum(axis=1)
    denom = np.full(hits.shape, float(k)) if k is not None else n_real(rel, m).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, hits / denom, 0.0)


def recall(labels, mask=None, *, k: int | None = None, threshold: float | None = None,
           n_relevant=None) -> np.ndarray:
    """Recall@k = #relevant in the top k / R (0 when R = 0)."""
    rel, _ = _binary(labels, mask, k, threshold)
    hits = rel.sum(axis=1)
    total = _n_relevant(labels, mask, threshold, n_relevant)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, hits / total, 0.0)


def hits(labels, mask=None, *, k: int | None = None, threshold: float | None = None) -> np.ndarray:
    """HITS@k = 1 if a relevant entry is in the top k, else 0."""
    rel, _ = _binary(labels, mask, k, threshold)
    return rel.any(axis=1).astype(np.float64)
