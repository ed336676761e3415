"""Classic rank metrics over padded ``[n_queries, k]`` arrays in ranked order (column 0 = rank 1).

Gains are used as given (graded or signed, never clamped); the binary metrics call an entry
relevant when its label is ``> 0``, or ``>= threshold`` (TREC DL: ``threshold=2``).

* DCG@k = sum_{i<=k} g_i d_i, ``d_i = 1/log2(i+1)`` (``discount="log2"``, Jarvelin and Kekalainen
  2002, linear gains as trec_eval and ranx) or 1 (``None``);
* nDCG@k = DCG@k / IDCG@k, IDCG from the ideal order of the query's judged pool (``ideal_gains``,
  default the row); ``undefined`` (0, as trec_eval, ranx, scikit-learn) for a pool with no positive
  gain: trec_eval's ``ndcg_cut`` for non-negative gains. Signed gains: every ranking of at most k pool
  entries has DCG in ``[Z-, Z+]`` (``Z+``: the positive gains in descending order; ``Z-``: the negative
  ones, most negative first), and nDCG@k = DCG/Z+ if DCG > 0, DCG/|Z-| if DCG < 0, in [-1, 1] (Gienapp,
  Stein, Hagen and Potthast, "The Impact of Negative Relevance Judgments on NDCG", CIKM 2020: plain
  DCG/IDCG is unbounded below and can exceed 1). A DCG outside ``[Z-, Z+]`` raises ``ValueError``;
* RR@k = 1 / rank of the first relevant entry in the top k (0 if none); MRR is its mean;
* AP@k = (1/R) sum_{i<=k, rel_i} Precision@i, R = relevant judged passages (``n_relevant``; default
  the count in the row), as trec_eval and ranx;
* Precision@k = #relevant in top k / k (as trec_eval); Recall@k = #relevant in top k / R;
  HITS@k = 1 if a relevant entry is in the top k.
"""

from __future__ import annotations

import numpy as np

from udcg_ltr.metrics._common import _as_2d, check_not_nan, discounted, discounts, over_cutoff, prepare, ratio


def dcg(gains, mask=None, *, k: int | None = None, discount: str | None = "log2") -> np.ndarray:
    """DCG@k = sum_{i<=k} g_i / log2(i + 1) with graded or signed gains, per query."""
    g, m = prepare(gains, mask, k, dtype=np.float64)
    if m is None:
        return g @ discounts(g.shape[1], discount)
    return discounted(g, m, discount).sum(axis=1)


def ideal_dcg(gains, mask=None, *, k: int | None = None, discount: str | None = "log2") -> np.ndarray:
    """DCG@k of the ideal order (descending gain; negatives go last, so they only count if k forces them)."""
    g, m = prepare(gains, mask, None, dtype=np.float64)
    if m is None:
        return dcg(-np.sort(-g, axis=1), None, k=k, discount=discount)
    ideal = -np.sort(np.where(m, -g, np.inf), axis=1)  # descending; padding (-inf) last
    ideal_mask = np.sort(~m, axis=1) == 0  # as many leading real slots as real entries
    return dcg(np.where(ideal_mask, ideal, 0.0), ideal_mask, k=k, discount=discount)


def dcg_bounds(gains, mask=None, *, k: int | None = None, discount: str | None = "log2") -> tuple[np.ndarray, np.ndarray]:
    """``(Z-, Z+)``: the least and the largest DCG@k of any ranking of at most ``k`` entries of the pool
    (module doc; rearrangement inequality: the discount decreases with rank)."""
    g, m = prepare(gains, mask, None, dtype=np.float64)
    real = np.ones(g.shape, bool) if m is None else m
    if not (real & (g < 0)).any():  # non-negative gains (every TREC pool): Z- = 0, Z+ = IDCG
        return np.zeros(g.shape[0]), ideal_dcg(g, m, k=k, discount=discount)
    upper = ideal_dcg(np.where(real & (g > 0), g, 0.0), real & (g > 0), k=k, discount=discount)
    return -ideal_dcg(np.where(real & (g < 0), -g, 0.0), real & (g < 0), k=k, discount=discount), upper


def ndcg(gains, mask=None, *, k: int | None = None, ideal_gains=None, ideal_mask=None,
         discount: str | None = "log2", undefined: float = 0.0) -> np.ndarray:
    """nDCG@k per query in [-1, 1]: DCG/Z+ when DCG > 0, DCG/|Z-| when DCG < 0 (module doc, Gienapp et al.
    2020); ``ideal_gains``/``ideal_mask``: the judged pool (every qrel, as trec_eval), default the row."""
    actual = dcg(gains, mask, k=k, discount=discount)
    if ideal_gains is None:
        ideal_gains, ideal_mask = gains, mask
    elif (n_ideal := _as_2d(ideal_gains, what="ideal_gains").shape[0]) != actual.shape[0]:
        # one query's pool must not be broadcast over every query
        raise ValueError(f"ideal_gains: {n_ideal} queries, the ranked gains {actual.shape[0]}")
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
    rel = (y >= threshold) if threshold is not None else (y if y.dtype == bool else y > 0)
    return (rel if m is None else rel & m), m


def _n_relevant(labels, mask, threshold, n_relevant) -> np.ndarray:
    """R per query: ``n_relevant`` (the judged pool's count) checked against the row, else the row's count. R
    below the relevant entries the row holds (AP of 3.0 from ``[[1, 1, 1]]`` with R = 1), of the wrong
    length (one query's R broadcast over all), negative, fractional or NaN is a ``ValueError``."""
    in_row = _binary(labels, mask, None, threshold)[0].sum(axis=1)
    if n_relevant is None:
        return in_row.astype(np.float64)
    total = np.asarray(n_relevant, dtype=np.float64).reshape(-1)
    check_not_nan(total, None, "n_relevant")
    if total.shape != in_row.shape:
        raise ValueError(f"n_relevant: {total.size} values for {in_row.size} queries")
    if (bad := (total < in_row) | (total != np.round(total))).any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"n_relevant: query {i} has R = {total[i]:g}, but its row alone holds {int(in_row[i])} "
                         "relevant entries (R counts every relevant judged passage, an integer)")
    return total


def reciprocal_rank(labels, mask=None, *, k: int | None = None, threshold: float | None = None) -> np.ndarray:
    """RR@k: 1 / rank of the first relevant entry within the top k, 0 if there is none."""
    rel, m = _binary(labels, mask, k, threshold)
    first_col = rel.argmax(axis=1)  # first True column (0 when none, masked below)
    found = rel[np.arange(rel.shape[0]), first_col] if rel.shape[1] else np.zeros(rel.shape[0], bool)
    rank = (first_col + 1.0 if m is None
            else np.take_along_axis(np.cumsum(m, axis=1), first_col[:, None], axis=1)[:, 0].astype(np.float64))
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
    return ratio(prec_sum, _n_relevant(labels, mask, threshold, n_relevant))


def precision(labels, mask=None, *, k: int | None = None, threshold: float | None = None) -> np.ndarray:
    """Precision@k = #relevant in the top k / k (``k=None``: over each row's real entries)."""
    rel, m = _binary(labels, mask, k, threshold)
    return over_cutoff(rel.sum(axis=1), k, rel, m)


def recall(labels, mask=None, *, k: int | None = None, threshold: float | None = None, n_relevant=None) -> np.ndarray:
    """Recall@k = #relevant in the top k / R (0 when R = 0)."""
    rel, _ = _binary(labels, mask, k, threshold)
    return ratio(rel.sum(axis=1), _n_relevant(labels, mask, threshold, n_relevant))


def hits(labels, mask=None, *, k: int | None = None, threshold: float | None = None) -> np.ndarray:
    """HITS@k = 1 if a relevant entry is in the top k, else 0."""
    rel, _ = _binary(labels, mask, k, threshold)
    return rel.any(axis=1).astype(np.float64)
