"""Rows grouped by query, laid out as a padded ``[G, m]`` index matrix: per-query statistics without a Python loop.

:func:`group_index` maps a flat sequence of query ids (one per row: a context, a pair, a passage) to
``idx[g, j]``, the row of the ``j``-th member of query ``g`` (-1 padding); :func:`to_padded` scatters
per-row values into that layout, so within-query comparisons become ``[G, m, m]`` array operations.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def group_index(qids: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """``(groups, idx)``: ``idx`` is a ``[G, m]`` matrix of row indices per query (-1 padding), queries in
    first-appearance order, rows within a query in input order; ``groups`` the query ids."""
    qids = np.asarray(qids, dtype=object)
    if len(qids) == 0:
        return np.array([], dtype=object), np.zeros((0, 0), dtype=np.int64)
    uniq, first, codes = np.unique(qids, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")  # the queries in first-appearance order
    rank_of = np.empty_like(by_first)  # the inverse permutation: a query's rank in that order
    rank_of[by_first] = np.arange(by_first.size)
    codes = rank_of[codes.ravel()]
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    counts = np.bincount(codes, minlength=len(uniq))
    within = np.arange(len(qids)) - (np.cumsum(counts) - counts)[sorted_codes]
    idx = np.full((len(uniq), counts.max()), -1, dtype=np.int64)
    idx[sorted_codes, within] = order
    return uniq[by_first], idx


def to_padded(values: np.ndarray, idx: np.ndarray, fill=np.nan) -> np.ndarray:
    """Scatter per-row values into the ``[G, m]`` query layout of :func:`group_index` (``fill`` for padding)."""
    return np.where(idx >= 0, np.asarray(values)[np.clip(idx, 0, None)], fill)
