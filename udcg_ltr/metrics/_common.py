"""Conventions shared by every metric of the library.

* Inputs are padded ``[n_queries, k]`` arrays **in ranked order**: column 0 is rank 1. A boolean
  ``mask`` of the same shape marks real entries (``True``; ``mask=None``: all). Padding takes no rank
  (a real entry's position counts the real entries before it) and need not be at the end.
* A cutoff ``k`` keeps the first ``k`` real entries of each row (``k=None``: all of them).
* Outputs are per-query ``float64`` arrays ``[n_queries]``; a metric undefined for a query (e.g.
  RA-nWG with no positive grade in the pool) is ``NaN`` ("NA"): :func:`mean` leaves NA out and counts it.
* Gains may be negative (signed utilities): nothing here clamps them. NaN at a real entry raises
  ``ValueError`` (:func:`check_not_nan`; torch twins alike); under a ``False`` mask it is padding.
* Ties when ranking by score (:func:`rank_by_scores`): higher score first, then ``ties="stable"``
  (the earlier column wins) or ``ties="trec"`` (scores compared in float32, equal ones by document id
  descending, byte-wise: how trec_eval re-sorts a run on reading, ``comp_sim_docno`` in its
  ``form_res_rels.c`` on ``float sim``; ranx sorts ties in no defined order).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def as_padded(values, mask=None, *, dtype=np.float64, what: str = "values") -> tuple[np.ndarray, np.ndarray]:
    """``(values, mask)``: a 2-D array with 0 under a ``False`` mask (padding garbage, NaN included, never
    reaches a sum) and a full boolean mask; a NaN at a real entry raises ``ValueError``."""
    values, mask = prepare(values, mask, dtype=dtype, what=what)
    if mask is None:
        return values, np.ones(values.shape, dtype=bool)
    return np.where(mask, values, 0.0), mask


def check_not_nan(values: np.ndarray, mask: np.ndarray | None, what: str = "values") -> None:
    """Raise ``ValueError`` when a real entry (``mask`` True; every entry when ``mask`` is None) is NaN."""
    if values.dtype.kind not in "fc" or values.size == 0:  # integers and booleans cannot hold NaN
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


def _as_2d(values, dtype=None, what: str = "values") -> np.ndarray:
    """``values`` as a ``[n_queries, k]`` array (a 1-D row is one query); any other shape is a ``ValueError``
    naming the argument (``what``), not a broadcast or an index error further down."""
    values = np.asarray(values, dtype=dtype)
    if values.ndim == 1:
        values = values[None, :]
    if values.ndim != 2:
        raise ValueError(f"{what}: expected a [n_queries, k] array, got shape {values.shape}")
    return values


def check_mask_values(mask) -> None:
    """Refuse a numeric mask holding anything but 0 and 1: a weight of 2.0 or -1.0 (or NaN) is not "real" or
    "padding", and ``bool(2.0)`` would silently read it as real (the torch twins refuse the same weights)."""
    raw = np.asarray(mask)
    if raw.dtype == bool or raw.size == 0:
        return
    if raw.dtype.kind not in "biuf":
        raise ValueError(f"mask: expected booleans (or 0/1), got dtype {raw.dtype}")
    bad = ~np.isin(raw, (0, 1))
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"mask: weights must be 0 or 1, got {raw[where].item()!r} at index {where}")


def _as_mask(mask, shape) -> np.ndarray:
    check_mask_values(mask)
    mask = _as_2d(mask, bool, "mask")
    if mask.shape != tuple(shape):
        raise ValueError(f"mask: shape {mask.shape} differs from values shape {tuple(shape)}")
    return mask


def check_cutoff(k, what: str = "k") -> None:
    """Refuse a cutoff that is not None or an integer >= 0: ``k=-1`` would slice off the last entry
    (``x[:-1]``) instead of meaning anything, and ``k=2.5`` has no rank."""
    if k is None:
        return
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"cutoff {what} must be an integer >= 0 or None, got {k!r}")
    if k < 0:
        raise ValueError(f"cutoff {what} must be >= 0, got {k}")


def prepare(values, mask=None, k: int | None = None, *, dtype=None,
            what: str = "values") -> tuple[np.ndarray, np.ndarray | None]:
    """``(values, mask)`` restricted to the first ``k`` real entries of each row (with ``mask=None``: a column
    slice, a view, and the mask stays None). Values under a ``False`` mask are left as they are: callers
    must not let them into sums. A NaN at a real entry, inside or beyond the cutoff, raises ``ValueError``."""
    check_cutoff(k)
    values = _as_2d(values, dtype, what)
    mask = None if mask is None else _as_mask(mask, values.shape)
    check_not_nan(values, mask, what)
    if mask is None:
        return (values if k is None else values[:, :k]), None
    return values, cutoff_mask(mask, k)


def column_positions(values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """0-based rank of each entry among its row's real entries (padding: -1); the column if ``mask=None``."""
    if mask is None:
        return np.broadcast_to(np.arange(values.shape[1]), values.shape)
    return np.where(mask, np.cumsum(mask, axis=1) - 1, -1)


def masked(values: np.ndarray, mask: np.ndarray | None, fill=0.0) -> np.ndarray:
    """``values`` with ``fill`` under a ``False`` mask (no copy when ``mask`` is None)."""
    return values if mask is None else np.where(mask, values, fill)


def n_real(values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Number of real entries per row (int64 ``[n_queries]``)."""
    if mask is None:
        return np.full(values.shape[0], values.shape[1], dtype=np.int64)
    return mask.sum(axis=1)


def over_cutoff(total: np.ndarray, k: int | None, values: np.ndarray, mask: np.ndarray | None,
                empty: float = 0.0) -> np.ndarray:
    """``total / K`` per row: ``K = k`` (fixed, as trec_eval's P@k) or, for ``k=None``, the row's real count;
    ``empty`` where ``K = 0``."""
    denom = np.full(total.shape, float(k)) if k is not None else n_real(values, mask).astype(np.float64)
    return ratio(total, denom, empty)


def ratio(num: np.ndarray, den: np.ndarray, fill: float = 0.0) -> np.ndarray:
    """``num / den`` where ``den > 0``, ``fill`` elsewhere (the division not taken raises no warning)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, fill)


def cutoff_mask(mask: np.ndarray, k: int | None) -> np.ndarray:
    """Mask of the first ``k`` real entries of each row."""
    check_cutoff(k)
    if k is None or k >= mask.shape[1]:
        return mask
    return mask & (np.cumsum(mask, axis=1) <= k)


def discounts(n: int, discount: str | None = "log2") -> np.ndarray:
    """Discounts ``d_i`` of ranks ``i = 1..n``: ``1 / log2(i + 1)`` (``"log2"``, DCG's) or 1 (None)."""
    if discount is None:
        return np.ones(n)
    if discount != "log2":
        raise ValueError(f"unknown discount {discount!r} (use 'log2' or None)")
    return 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))


def discounted(values: np.ndarray, mask: np.ndarray | None, discount: str | None = "log2") -> np.ndarray:
    """``values * d_i`` with ``i`` each real entry's rank (:func:`discounts`); 0 under a ``False`` mask."""
    return masked(values * discounts(values.shape[1], discount)[np.clip(column_positions(values, mask), 0, None)], mask)


TIES = ("stable", "trec")


def rank_by_scores(scores, mask=None, *, k: int | None = None, ties: str = "stable", ids=None) -> np.ndarray:
    """Column permutation per row that sorts real entries by descending score, padding last (reorder any
    aligned array with :func:`take_ranked`); with ``k``, its first ``k`` columns. Ties: the module doc's
    rule; ``ties="trec"`` needs ``ids`` (the aligned ``[Q, W]`` document ids; equal ids: input order).
    ``+-inf`` are ordinary scores (a real ``-inf`` still ranks before every padding entry)."""
    if ties not in TIES:
        raise ValueError(f"ties must be one of {TIES}, got {ties!r}")
    check_cutoff(k)
    s = _as_2d(scores, what="scores")
    if not np.issubdtype(s.dtype, np.floating):
        s = s.astype(np.float64)
    id_keys = None
    if ties == "trec":
        if ids is None:
            raise ValueError("ties='trec' breaks ties by document id: pass ids= (the [n_queries, k] ids)")
        with np.errstate(over="ignore"):  # beyond float32 range: +-inf, as trec_eval's cast
            s = s.astype(np.float32)
        ids = np.asarray(ids, dtype=object)
        ids = ids[None, :] if ids.ndim == 1 else ids
        if ids.shape != s.shape:
            raise ValueError(f"ids shape {ids.shape} differs from scores shape {s.shape}")
        # ascending key = descending id, in code point order (= UTF-8 byte order, as strcmp)
        id_keys = -np.unique(ids.astype(str).ravel(), return_inverse=True)[1].reshape(s.shape)
    width = s.shape[1]
    mask = None if mask is None else _as_mask(mask, s.shape)
    keyed = np.negative(s) if mask is None else np.where(mask, np.negative(s), np.inf)
    if width == 0:
        return np.zeros(s.shape, dtype=np.intp)
    if np.isnan(keyed).any():
        raise ValueError("scores of real entries must not be NaN")
    n_out = width if k is None else min(max(int(k), 0), width)
    # numpy's default sort (unstable, SIMD) is several times faster than a stable one; only rows whose
    # leading n_out + 1 sorted keys hold a tie can depend on the tie-break, and they are sorted again.
    order = np.argsort(keyed, axis=1)
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


def top_k_mask(scores, mask=None, k: int | None = None) -> np.ndarray:
    """``[Q, n]`` boolean: the real entries among the top ``k`` of each row by descending score (stable ties);
    numpy twin of :func:`udcg_ltr.metrics.torch_ops.top_k_mask_torch`, with the same refusals (NaN score at a
    real entry, negative ``k``, a mask that is not 0/1 or not the scores' shape)."""
    s = _as_2d(scores, np.float64, "scores")
    m = np.ones(s.shape, bool) if mask is None else _as_mask(mask, s.shape)
    order = rank_by_scores(s, m, k=k)
    out = np.zeros(s.shape, bool)
    np.put_along_axis(out, order, True, axis=1)
    return out & m


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
    return MeanResult(value=float(per_query[~na].mean()) if n else float("nan"), n=n, n_na=int(na.sum()))
