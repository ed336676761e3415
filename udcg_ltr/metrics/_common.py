"""Conventions shared by every metric of the library.

* Inputs are padded ``[n_queries, k]`` arrays **in ranked order**: column 0 is rank 1. A boolean
  ``mask`` of the same shape marks real entries (``True``) and padding (``False``); ``mask=None``
  means every entry is real. Masked entries are absent: they take no rank, so a real entry's
  position is the number of real entries before it in its row (padding need not be at the end).
* A cutoff ``k`` keeps the first ``k`` real entries of each row (``k=None``: all of them).
* Outputs are per-query ``float64`` arrays of shape ``[n_queries]``. Where a metric is undefined
  for a query (for example RA-nWG with no positive grade in the pool), the value is ``NaN``
  ("NA"): :func:`mean` leaves NA out of the average and reports how many there were.
* Gains may be negative (signed utilities): nothing here clamps or pads them.
* Ties when ranking by score (:func:`rank_by_scores`): higher score first; equal scores keep
  their input order (a stable sort), so the earlier column wins. Deterministic and documented.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def as_padded(values, mask=None, *, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(values, mask)`` as a 2-D float array and a boolean mask of the same shape.

    Masked-out values are replaced by 0 so that sums never see padding garbage (NaN included).
    """
    values = np.asarray(values, dtype=dtype)
    if values.ndim == 1:
        values = values[None, :]
    if values.ndim != 2:
        raise ValueError(f"expected a [n_queries, k] array, got shape {values.shape}")
    if mask is None:
        mask = np.ones(values.shape, dtype=bool)
    else:
        mask = np.asarray(mask, dtype=bool)
        if mask.ndim == 1:
            mask = mask[None, :]
        if mask.shape != values.shape:
            raise ValueError(f"mask shape {mask.shape} differs from values shape {values.shape}")
        values = np.where(mask, values, 0.0)
    return values, mask


def positions(mask: np.ndarray) -> np.ndarray:
    """0-based rank of each real entry among the real entries of its row (padding gets -1)."""
    return np.where(mask, np.cumsum(mask, axis=1) - 1, -1)


def cutoff_mask(mask: np.ndarray, k: int | None) -> np.ndarray:
    """Mask of the first ``k`` real entries of each row."""
    if k is None:
        return mask
    if k < 0:
        raise ValueError(f"cutoff k must be >= 0, got {k}")
    return mask & (positions(mask) < k)


def log2_discounts(n: int) -> np.ndarray:
    """``1 / log2(i + 1)`` for ranks ``i = 1..n`` (the standard DCG discount)."""
    return 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))


def rank_by_scores(scores, mask=None) -> np.ndarray:
    """Column permutation per row that sorts real entries by descending score, padding last.

    Ties keep input order (stable sort): with equal scores the earlier column ranks higher.
    Use :func:`take_ranked` to reorder any aligned array with the result.
    """
    scores, mask = as_padded(scores, mask)
    keyed = np.where(mask, -scores, np.inf)
    return np.argsort(keyed, axis=1, kind="stable")


def take_ranked(values, order: np.ndarray) -> np.ndarray:
    return np.take_along_axis(np.asarray(values), order, axis=1)


@dataclass(frozen=True)
class MeanResult:
    """A mean over queries that leaves undefined (NaN, "NA") values out and says how many there were."""

    value: float
    n: int
    n_na: int

    def __float__(self) -> float:
        return self.value


def mean(per_query) -> MeanResult:
    """Average of per-query values, NA (NaN) excluded and counted."""
    per_query = np.asarray(per_query, dtype=np.float64)
    na = np.isnan(per_query)
    n = int((~na).sum())
    value = float(per_query[~na].mean()) if n else float("nan")
    return MeanResult(value=value, n=n, n_na=int(na.sum()))
