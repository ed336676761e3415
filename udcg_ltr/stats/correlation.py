"""Per-query rank correlation between a metric and end-to-end outcomes, vectorised over queries.

For a query's contexts, the *ideal order* sorts them by outcome score (correct 2 > abstained 1 > wrong 0) and
a metric induces the order of its values; their agreement is

* Spearman's rho: the Pearson correlation of the rank vectors, ties averaged (``scipy.stats.spearmanr``);
* Kendall's tau-b: ``(n_c - n_d) / sqrt((n_0 - n_1)(n_0 - n_2))``, ``n_1`` and ``n_2`` the tied pairs of each
  side (``scipy.stats.kendalltau``'s default).

A query where either side is constant (or with fewer than 2 usable contexts) is NaN ("NA"), counted and left out
of averages. Metric values are rounded to ``decimals`` (default 12) so that values equal up to floating-point
noise are ties; a NaN metric value (e.g. ANSWER_PROB without its annotation) removes that context from its
query. Queries are laid out as a padded ``[G, m]`` matrix (:mod:`udcg_ltr.stats.groups`): no Python loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from udcg_ltr.stats.groups import group_index, to_padded


def average_ranks(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """1-based ranks along the last axis with ties averaged, over the entries where ``mask``; NaN elsewhere."""
    x = np.asarray(x, dtype=np.float64)
    mask = np.asarray(mask, dtype=bool)
    xi, xj = x[..., :, None], x[..., None, :]
    mj = mask[..., None, :]
    less = ((xj < xi) & mj).sum(axis=-1)
    equal = ((xj == xi) & mj).sum(axis=-1)  # includes the entry itself
    return np.where(mask, less + (equal + 1) / 2.0, np.nan)


def spearman_rows(x: np.ndarray, y: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Spearman's rho per row of ``[G, m]`` arrays over the masked entries (NaN where undefined)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    mask = np.ones(x.shape, bool) if mask is None else np.asarray(mask, bool)
    mask = mask & ~np.isnan(x) & ~np.isnan(y)
    rx, ry = (np.where(mask, average_ranks(np.where(mask, v, 0.0), mask), 0.0) for v in (x, y))
    n = mask.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = np.where(mask, rx - (rx.sum(-1) / n)[..., None], 0.0)  # deviations from the mean rank
        dy = np.where(mask, ry - (ry.sum(-1) / n)[..., None], 0.0)
        sxx, syy, sxy = (dx * dx).sum(-1), (dy * dy).sum(-1), (dx * dy).sum(-1)
        rho = sxy / np.sqrt(sxx * syy)
    # Sums of squared rank deviations are multiples of 1/4: a constant side gives exactly 0.
    return np.where((n < 2) | (sxx <= 1e-12) | (syy <= 1e-12), np.nan, np.clip(rho, -1.0, 1.0))


def kendall_rows(x: np.ndarray, y: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Kendall's tau-b per row of ``[G, m]`` arrays over the masked entries (NaN where undefined)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    mask = np.ones(x.shape, bool) if mask is None else np.asarray(mask, bool)
    mask = mask & ~np.isnan(x) & ~np.isnan(y)
    m = x.shape[-1]
    upper = np.triu(np.ones((m, m), dtype=bool), k=1)
    both = mask[..., :, None] & mask[..., None, :] & upper
    sx, sy = (np.sign(v[..., :, None] - v[..., None, :]) for v in (x, y))
    s = np.where(both, sx * sy, 0.0).sum(axis=(-2, -1))
    n0 = both.sum(axis=(-2, -1)).astype(np.float64)
    ties_x = (both & (sx == 0)).sum(axis=(-2, -1))
    ties_y = (both & (sy == 0)).sum(axis=(-2, -1))
    denom = np.sqrt((n0 - ties_x) * (n0 - ties_y))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = s / denom
    return np.where(denom > 0, np.clip(tau, -1.0, 1.0), np.nan)


@dataclass
class QueryCorrelations:
    """Per-query correlations of one metric: ``qids[g]`` -> ``spearman[g]``, ``kendall[g]`` (NaN = NA)."""

    qids: np.ndarray
    spearman: np.ndarray
    kendall: np.ndarray
    n_contexts: np.ndarray  # usable contexts per query
    outcome_constant: np.ndarray  # bool: the outcomes do not vary (NA whatever the metric)
    metric_constant: np.ndarray  # bool: the metric does not vary over the query's contexts


def per_query_correlations(qids: Sequence, metric: np.ndarray, outcome: np.ndarray, *, decimals: int | None = 12,
                           groups_idx: tuple[np.ndarray, np.ndarray] | None = None) -> QueryCorrelations:
    """Spearman and Kendall tau-b between ``metric`` and ``outcome`` within each query (see the module docstring)."""
    groups, idx = groups_idx if groups_idx is not None else group_index(qids)
    metric = np.asarray(metric, dtype=np.float64)
    if decimals is not None:
        metric = np.round(metric, decimals)
    x = to_padded(metric, idx)
    y = to_padded(np.asarray(outcome, dtype=np.float64), idx)
    mask = (idx >= 0) & ~np.isnan(x) & ~np.isnan(y)
    n = mask.sum(axis=1)

    def constant(v):
        vmax = np.where(mask, v, -np.inf).max(axis=1, initial=-np.inf)
        vmin = np.where(mask, v, np.inf).min(axis=1, initial=np.inf)
        return (n < 2) | (vmax == vmin)

    return QueryCorrelations(qids=groups, spearman=spearman_rows(x, y, mask), kendall=kendall_rows(x, y, mask),
                             n_contexts=n, outcome_constant=constant(y), metric_constant=constant(x))
