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
* NaN is rejected at this boundary, numpy and torch alike (:func:`check_not_nan`): a NaN at a real
  entry (``mask`` True, or anywhere with ``mask=None``) raises ``ValueError``; a NaN under a
  ``False`` mask is padding and never reaches a result. NA is an *output* (a metric undefined for
  a query), never an input.
* Ties when ranking by score (:func:`rank_by_scores`), one rule with two tie-breaks:
  higher score first, then ``ties="stable"`` (the default: equal scores keep their input order,
  the earlier column wins) or ``ties="trec"`` (scores compared in float32, equal ones by document
  id descending, byte-wise: how trec_eval re-sorts a run on reading, ``comp_sim_docno`` in its
  ``form_res_rels.c`` on ``float sim``; ranx sorts ties in no defined order). Deterministic and
  documented. :func:`udcg_ltr.data.readers.trec.write_trec_run` writes ranks trec_eval reads back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def as_padded(values, mask=None, *, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(values, mask)`` as a 2-D float array and a boolean mask of the same shape.

    Masked-out values are replaced by 0 so that sums never see padding garbage (NaN included);
    a NaN at a real entry raises ``ValueError`` (:func:`check_not_nan`).
    """
    values = np.asarray(values, dtype=dtype)
    if values.ndim == 1:
        values = values[None, :]
    if values.ndim != 2:
        raise ValueError(f"expected a [n_queries, k] array, got shape {values.shape}")
    if mask is None:
        mask = np.ones(values.shape, dtype=bool)
        check_not_nan(values, None)
    else:
        mask = _as_mask(mask, values.shape)
        check_not_nan(values, mask)
        values = np.where(mask, values, 0.0)
    return values, mask


def check_not_nan(values: np.ndarray, mask: np.ndarray | None, what: str = "values") -> None:
    """Raise ``ValueError`` when a real entry (``mask`` True; every entry when ``mask`` is None) is NaN.

    NaN under a ``False`` mask is padding and allowed. Integer and boolean arrays cannot hold NaN.
    """
    if values.dtype.kind not in "fc" or values.size == 0:
        return
    nan = np.isnan(values)
    if not nan.any():  # the common case: one vectorised pass, no masked copy
        return
    if mask is not None:
        nan &= mask
    if nan.any():
        where = tuple(int(i) for i in np.argwhere(nan)[0])  # (query, column) for [Q, k] arrays
        raise ValueError(f"{what}: NaN at a real entry (index {where}; {int(nan.sum())} in all). "
                         "NaN is not a label, gain, utility or score: mask the entry out or fix its source")


def _as_2d(values, dtype=None) -> np.ndarray:
    values = np.asarray(values) if dtype is None else np.asarray(values, dtype=dtype)
    if values.ndim == 1:
        values = values[None, :]
    if values.ndim != 2:
        raise ValueError(f"expected a [n_queries, k] array, got shape {values.shape}")
    return values


def _as_mask(mask, shape) -> np.ndarray:
    mask = np.asarray(mask, dtype=bool)
    if mask.ndim == 1:
        mask = mask[None, :]
    if mask.shape != tuple(shape):
        raise ValueError(f"mask shape {mask.shape} differs from values shape {tuple(shape)}")
    return mask


def prepare(values, mask=None, k: int | None = None, *, dtype=None) -> tuple[np.ndarray, np.ndarray | None]:
    """``(values, mask)`` restricted to the first ``k`` real entries of each row, without copying when possible.

    With ``mask=None`` (every entry real) the cutoff is a column slice (a view) and the returned
    mask stays ``None``; otherwise the returned mask is :func:`cutoff_mask`. Values under a
    ``False`` mask are left as they are: callers must not let them into sums. A NaN at a real
    entry of the row, inside or beyond the cutoff, raises ``ValueError`` (:func:`check_not_nan`).
    """
    if k is not None and k < 0:
        raise ValueError(f"cutoff k must be >= 0, got {k}")
    values = _as_2d(values, dtype)
    if mask is None:
        check_not_nan(values, None)
        if k is not None and k < values.shape[1]:
            values = values[:, :k]
        return values, None
    mask = _as_mask(mask, values.shape)
    check_not_nan(values, mask)
    return values, cutoff_mask(mask, k)


def column_positions(values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """0-based rank of each entry: :func:`positions` of ``mask``, or column indices when ``mask`` is None."""
    if mask is None:
        return np.broadcast_to(np.arange(values.shape[1]), values.shape)
    return positions(mask)


def masked(values: np.ndarray, mask: np.ndarray | None, fill=0.0) -> np.ndarray:
    """``values`` with ``fill`` under a ``False`` mask (no copy when ``mask`` is None)."""
    return values if mask is None else np.where(mask, values, fill)


def n_real(values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Number of real entries per row (int64 ``[n_queries]``)."""
    if mask is None:
        return np.full(values.shape[0], values.shape[1], dtype=np.int64)
    return mask.sum(axis=1)


def positions(mask: np.ndarray) -> np.ndarray:
    """0-based rank of each real entry among the real entries of its row (padding gets -1)."""
    return np.where(mask, np.cumsum(mask, axis=1) - 1, -1)


def cutoff_mask(mask: np.ndarray, k: int | None) -> np.ndarray:
    """Mask of the first ``k`` real entries of each row."""
    if k is None:
        return mask
    if k < 0:
        raise ValueError(f"cutoff k must be >= 0, got {k}")
    if k >= mask.shape[1]:
        return mask
    return mask & (np.cumsum(mask, axis=1) <= k)


def log2_discounts(n: int) -> np.ndarray:
    """``1 / log2(i + 1)`` for ranks ``i = 1..n`` (the standard DCG discount)."""
    return 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))


TIES = ("stable", "trec")


def rank_by_scores(scores, mask=None, *, k: int | None = None, ties: str = "stable", ids=None) -> np.ndarray:
    """Column permutation per row that sorts real entries by descending score, padding last.

    Ties (equal scores), the library's one rule with two tie-breaks:

    * ``ties="stable"`` (default): input order, the earlier column ranks higher;
    * ``ties="trec"``: the order trec_eval re-derives when it reads a run: scores compared as the
      32-bit C ``float`` it stores them in (so scores equal in float32 tie), then document id
      descending (``comp_sim_docno``: ``strcmp`` of the docnos reversed; ``ids`` is the aligned
      ``[Q, W]`` array of ids). Use it to reproduce trec_eval exactly on runs with tied scores.
      Equal ids fall back to input order.

    Use :func:`take_ranked` to reorder any aligned array with the result. With ``k`` only the
    first ``k`` columns of that permutation are returned (``[n_queries, min(k, width)]``),
    identical to ``rank_by_scores(scores, mask)[:, :k]``.

    Real scores must not be NaN (no order is defined for them); ``+-inf`` are ordinary values
    (a real ``-inf`` still ranks before every padding entry).

    Speed: the rows are sorted with numpy's default (unstable, SIMD) sort on the native float
    dtype, which is several times faster than a stable sort; the few rows whose leading
    ``k + 1`` sorted keys contain a tie, the only rows where the tie-break can matter for the
    returned columns, are sorted again with the tie-break as a secondary key.
    """
    if ties not in TIES:
        raise ValueError(f"ties must be one of {TIES}, got {ties!r}")
    s = _as_2d(scores)
    if not np.issubdtype(s.dtype, np.floating):
        s = s.astype(np.float64)
    if ties == "trec":
        with np.errstate(over="ignore"):  # beyond float32 range: +-inf, as trec_eval's cast
            s = s.astype(np.float32)
    width = s.shape[1]
    if mask is None:
        keyed = np.negative(s)
    else:
        mask = _as_mask(mask, s.shape)
        keyed = np.where(mask, np.negative(s), np.inf)
    id_keys = None
    if ties == "trec":
        if ids is None:
            raise ValueError("ties='trec' breaks ties by document id: pass ids= (the [n_queries, k] ids)")
        id_keys = _descending_id_keys(ids, s.shape)
    if width == 0:
        return np.zeros(s.shape, dtype=np.intp)
    if np.isnan(keyed).any():
        raise ValueError("scores of real entries must not be NaN")
    n_out = width if k is None else min(max(int(k), 0), width)
    order = np.argsort(keyed, axis=1)  # unstable, fixed below where a tie can matter
    if n_out < width:
        order = order[:, :n_out + 1]
    lead = np.take_along_axis(keyed, order, axis=1)
    tied = (lead[:, 1:] == lead[:, :-1]).any(axis=1)
    order = order[:, :n_out]
    if tied.any():
        rows = np.flatnonzero(tied)
        # lexsort is stable and its last key is the primary one: padding flag, then score, then
        # the tie-break (column order implicitly, or the descending id). A real -inf score (key
        # +inf, like padding) still ranks before the padding.
        keys = [keyed[rows]] if id_keys is None else [id_keys[rows], keyed[rows]]
        if mask is not None:
            keys.append(~mask[rows])
        order[rows] = np.lexsort(tuple(keys), axis=1)[:, :n_out]
    return order


def _descending_id_keys(ids, shape) -> np.ndarray:
    """Integer sort keys, ascending key = descending id (code point order, i.e. UTF-8 byte order as strcmp)."""
    ids = np.asarray(ids, dtype=object)
    if ids.ndim == 1:
        ids = ids[None, :]
    if ids.shape != tuple(shape):
        raise ValueError(f"ids shape {ids.shape} differs from scores shape {tuple(shape)}")
    _, codes = np.unique(ids.astype(str).ravel(), return_inverse=True)
    return -codes.reshape(shape)


def take_ranked(values, order: np.ndarray) -> np.ndarray:
    """``values`` reordered per row by ``order`` (from :func:`rank_by_scores`); works with truncated orders."""
    return np.take_along_axis(_as_2d(values), order, axis=1)


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
