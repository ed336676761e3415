"""Classic rank metrics over padded ``[n_queries, k]`` arrays in ranked order (column 0 = rank 1).

Graded or signed gains are used as given (no clamping); the binary metrics call an entry relevant
when its label is ``> 0``, or ``>= threshold`` when a threshold is given (TREC DL: ``threshold=2``).

* DCG@k  = sum_{i<=k} g_i * d_i, with ``d_i = 1/log2(i+1)`` (``discount="log2"``) or 1 (``None``);
* nDCG@k = DCG@k / IDCG@k, IDCG from the ideal order of the query's judged pool (``ideal_gains``,
  default: the row itself); signed gains put positives first and negatives last in the ideal order;
  a query whose IDCG is not positive gets ``undefined`` (0 by default, as trec_eval, ranx and
  scikit-learn do);
* RR@k = 1 / rank of the first relevant entry in the top k (0 if none); MRR is its mean;
* AP@k = (1/R) sum_{i<=k, rel_i} Precision@i, where R is the number of relevant judged passages
  (``n_relevant``; default the count in the row), as trec_eval and ranx define it;
* Precision@k = #relevant in top k / k (k fixed, as trec_eval); Recall@k = #relevant in top k / R;
  HITS@k = 1 if any relevant entry is in the top k.
"""

from __future__ import annotations

import numpy as np

from udcg_ltr.metrics._common import as_padded, cutoff_mask, log2_discounts, positions


def _discounts(mask: np.ndarray, discount: str | None) -> np.ndarray:
    if discount is None:
        return mask.astype(np.float64)
    if discount != "log2":
        raise ValueError(f"unknown discount {discount!r} (use 'log2' or None)")
    pos = positions(mask)
    table = log2_discounts(mask.shape[1])
    return np.where(mask, table[np.clip(pos, 0, None)], 0.0)


def dcg(gains, mask=None, *, k: int | None = None, discount: str | None = "log2") -> np.ndarray:
    """DCG@k = sum_{i<=k} g_i / log2(i + 1) with graded or signed gains, per query."""
    g, mask = as_padded(gains, mask)
    mask = cutoff_mask(mask, k)
    return (np.where(mask, g, 0.0) * _discounts(mask, discount)).sum(axis=1)


def ideal_dcg(gains, mask=None, *, k: int | None = None, discount: str | None = "log2") -> np.ndarray:
    """DCG@k of the ideal order (descending gain; negatives go last, so they only count if k forces them)."""
    g, mask = as_padded(gains, mask)
    ideal = np.sort(np.where(mask, g, -np.inf), axis=1)[:, ::-1]
    ideal_mask = np.isfinite(ideal)
    return dcg(np.where(ideal_mask, ideal, 0.0), ideal_mask, k=k, discount=discount)


def ndcg(gains, mask=None, *, k: int | None = None, ideal_gains=None, ideal_mask=None,
         discount: str | None = "log2", undefined: float = 0.0) -> np.ndarray:
    """nDCG@k = DCG@k / IDCG@k per query (``undefined`` where IDCG <= 0)."""
    actual = dcg(gains, mask, k=k, discount=discount)
    if ideal_gains is None:
        ideal_gains, ideal_mask = gains, mask
    best = ideal_dcg(ideal_gains, ideal_mask, k=k, discount=discount)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = actual / best
    return np.where(best > 0, out, undefined)


def _binary(labels, mask, threshold):
    y, mask = as_padded(labels, mask)
    rel = (y >= threshold) if threshold is not None else (y > 0)
    return rel & mask, mask


def reciprocal_rank(labels, mask=None, *, k: int | None = None, threshold: float | None = None) -> np.ndarray:
    """RR@k: 1 / rank of the first relevant entry within the top k, 0 if there is none."""
    rel, mask = _binary(labels, mask, threshold)
    hit = rel & cutoff_mask(mask, k)
    pos = np.where(hit, positions(mask), np.iinfo(np.int64).max)
    first = pos.min(axis=1)
    return np.where(hit.any(axis=1), 1.0 / (first + 1.0), 0.0)


mrr = reciprocal_rank  # per-query values; MRR is their mean (metrics.mean)


def average_precision(labels, mask=None, *, k: int | None = None, threshold: float | None = None,
                      n_relevant=None) -> np.ndarray:
    """AP@k = (1/R) * sum over relevant ranks i <= k of Precision@i (0 when R = 0)."""
    rel, mask = _binary(labels, mask, threshold)
    hit = rel & cutoff_mask(mask, k)
    pos = positions(mask)
    cum_hits = np.cumsum(hit, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        prec_at_hit = np.where(hit, cum_hits / (pos + 1.0), 0.0)
    total = rel.sum(axis=1) if n_relevant is None else np.asarray(n_relevant, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        ap = prec_at_hit.sum(axis=1) / total
    return np.where(total > 0, ap, 0.0)


def precision(labels, mask=None, *, k: int | None = None, threshold: float | None = None) -> np.ndarray:
    """Precision@k = #relevant in the top k / k (``k=None``: over each row's real entries)."""
    rel, mask = _binary(labels, mask, threshold)
    hits = (rel & cutoff_mask(mask, k)).sum(axis=1)
    denom = np.full(hits.shape, float(k)) if k is not None else mask.sum(axis=1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, hits / denom, 0.0)


def recall(labels, mask=None, *, k: int | None = None, threshold: float | None = None,
           n_relevant=None) -> np.ndarray:
    """Recall@k = #relevant in the top k / R (0 when R = 0)."""
    rel, mask = _binary(labels, mask, threshold)
    hits = (rel & cutoff_mask(mask, k)).sum(axis=1)
    total = rel.sum(axis=1) if n_relevant is None else np.asarray(n_relevant, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, hits / total, 0.0)


def hits(labels, mask=None, *, k: int | None = None, threshold: float | None = None) -> np.ndarray:
    """HITS@k = 1 if a relevant entry is in the top k, else 0."""
    rel, mask = _binary(labels, mask, threshold)
    return (rel & cutoff_mask(mask, k)).any(axis=1).astype(np.float64)
