"""The set-based, rarity-aware family: RA-nWG@K, PROC@K, %PROC@K, N-Recall4+@K, N-Recall5@K,
Precision4+@K and Harm@K (Dallaire 2025, "Practical RAG Evaluation: A Rarity-Aware Set-Based Metric
and Cost-Latency-Quality Trade-offs", arXiv:2511.09545, Sec. 2.4 "Formal definitions").

Labels are utility grades ``g`` in ``0..5`` (the paper's 1..5 rubric, 5 = answers clearly, 4 = highly
relevant, 3 = partially relevant; our 0, unlabelled / not relevant, is treated like 1 and 2: no gain,
counted as harm). Every metric is order-free: only the *set* ``TopK(q)`` of the first ``K`` real
entries of a row counts (``K = k``; ``k=None``: the row's real count). The row's real entries are the
*retrieval pool* a reranker could reorder (PROC's pool); ``pool_grades``/``pool_mask`` the query's
whole *judged pool* (default the row, of which it must be a superset), which sets the rarity weights,
``G_ideal(K)`` and the ``R`` of N-Recall. With ``n_g`` passages of grade ``g`` in the judged pool:

* base utilities ``b5 = 1.0, b4 = 0.5, b3 = 0.1, b2 = b1 = b0 = 0``; rarity ``r_g = b_g / p_g**alpha``
  with ``p_g = n_g / N`` (``r_g = 0`` when ``n_g = 0``), ``alpha = 1``;
* weights ``w5 = 1``, ``w4 = min(r4 / r5, cap4)``, ``w3 = min(r3 / r5, cap3)``, ``w2 = w1 = w0 = 0``
  (``cap4 = 1.0``, ``cap3 = 0.25``); no grade 5 (``n5 = 0``): ``w5 = 1, w4 = 1, w3 = 0.2``;
* ``RA-nWG@K = G_obs(K) / G_ideal(K)`` with ``G_obs(K) = sum_{d in TopK(q)} w_g(d)`` and ``G_ideal(K)``
  the sum of the ``K`` largest weights of the judged pool; NA when ``G_ideal(K) = 0``;
* ``N-Recall4+@K = #{d in TopK: g >= 4} / min(K, R4+)`` with ``R4+ = n4 + n5`` (NA when ``R4+ = 0``);
  ``N-Recall5@K`` likewise with grade 5 only;
* ``Precision4+@K = #{d in TopK: g >= 4} / K``; ``Harm@K = #{d in TopK: g <= 2} / K``, over ``K`` even
  when a row has fewer entries (as the paper and trec_eval's P@k);
* ``PROC@K`` (pool-restricted oracle ceiling, Sec. 5.1-5.2): the score of the best ``K``-subset of the retrieval pool;
  ``%PROC@K = actual / PROC@K`` (a fraction; the paper prints a percentage), NA when PROC is NA or 0.
"""

from __future__ import annotations

import numpy as np

from udcg_ltr.metrics._common import _as_2d, _as_mask, over_cutoff, prepare, ratio

#: Base (stationary) utilities ``b_g`` for grades 0..5 (paper Sec. 2.4).
BASE_UTILITIES = (0.0, 0.0, 0.0, 0.1, 0.5, 1.0)
#: Weights ``(w4, w3)`` used when the judged pool has no grade-5 passage (``w5 = 1`` always).
NO_GRADE5_FALLBACK = (1.0, 0.2)
MAX_GRADE = 5


def _grades(values, mask) -> tuple[np.ndarray, np.ndarray]:
    """Integer grades ``[Q, W]`` (padding -> -1) and the full boolean mask; rejects labels outside 0..5."""
    g = _as_2d(values, np.float64)
    m = np.ones(g.shape, dtype=bool) if mask is None else _as_mask(mask, g.shape)
    if not np.isin(g[m], np.arange(MAX_GRADE + 1)).all():  # NaN, negative, fractional or too high
        raise ValueError(f"grades must be integers in 0..{MAX_GRADE}")
    return np.where(m, g, -1).astype(np.int64), m


def _check_weight_settings(alpha, cap4, cap3, base, fallback) -> np.ndarray:
    """``base`` as an array, after refusing settings that would take RA-nWG outside [0, 1]: a negative base
    utility, cap or fallback weight gives negative weights (RA-nWG of -0.82), ``b5 <= 0`` divides by zero,
    a non-finite ``alpha`` makes every weight NaN."""
    b = np.asarray(base, dtype=np.float64)
    if b.shape != (MAX_GRADE + 1,):
        raise ValueError(f"base must give one utility per grade 0..{MAX_GRADE}")
    settings = {"alpha": alpha, "cap4": cap4, "cap3": cap3, "fallback[0]": fallback[0], "fallback[1]": fallback[1]}
    for name, value in settings.items():
        if not np.isfinite(value) or (name != "alpha" and value < 0):
            raise ValueError(f"{name} must be a finite number{'' if name == 'alpha' else ' >= 0'}, got {value!r}")
    if not np.isfinite(b).all() or (b < 0).any() or b[MAX_GRADE] <= 0:
        raise ValueError(f"base utilities must be finite and >= 0 with b5 > 0, got {tuple(b)}")
    return b


def _check_pool(grades, mask, pool_grades, pool_mask) -> None:
    """The judged pool must hold the row: per query, as many queries and at least as many passages of each
    weighted grade (3, 4, 5) as the row. Otherwise G_obs can exceed G_ideal (RA-nWG of 1.67) and N-Recall
    exceed 1; lower grades weigh 0, so unjudged (grade 0) entries of a row need not be in the pool."""
    row, _ = _grades(grades, mask)
    pool, _ = _grades(pool_grades, pool_mask)
    if row.shape[0] != pool.shape[0]:
        raise ValueError(f"pool_grades: {pool.shape[0]} queries, the ranked grades {row.shape[0]}")
    for g in range(3, MAX_GRADE + 1):
        short = (row == g).sum(axis=1) > (pool == g).sum(axis=1)
        if short.any():
            i = int(np.flatnonzero(short)[0])
            raise ValueError(f"pool_grades: query {i} ranks {int((row[i] == g).sum())} passages of grade {g} but "
                             f"its judged pool holds {int((pool[i] == g).sum())}: the pool must contain the row")


def rarity_weights(pool_grades, pool_mask=None, *, alpha: float = 1.0, cap4: float = 1.0, cap3: float = 0.25,
                   base=BASE_UTILITIES, fallback=NO_GRADE5_FALLBACK) -> np.ndarray:
    """Per-query grade weights ``w_g`` (``[n_queries, 6]``, column g = grade g), paper Sec. 2.4; ``alpha = 0``
    removes the rarity correction (``w4 = b4/b5``, ``w3 = b3/b5`` under the caps)."""
    b = _check_weight_settings(alpha, cap4, cap3, base, fallback)
    grades, _ = _grades(pool_grades, pool_mask)
    n = np.stack([(grades == g).sum(axis=1) for g in range(MAX_GRADE + 1)], axis=1).astype(np.float64)  # n_g
    with np.errstate(invalid="ignore", divide="ignore"):
        # r_g / r_5 = (b_g / b_5) * (n_5 / n_g)^alpha for g = 3, 4; N cancels. r_g = 0 when n_g = 0.
        rarity = np.where(n[:, 3:5] > 0, (b[3:5] / b[5]) * (n[:, 5:] / n[:, 3:5]) ** alpha, 0.0)
    w = np.zeros((grades.shape[0], MAX_GRADE + 1))
    # columns are grades 3, 4; ``fallback`` is ordered (w4, w3), hence reversed
    w[:, 3:5] = np.where(n[:, 5:] > 0, np.minimum(rarity, [cap3, cap4]), fallback[::-1])
    w[:, 5] = 1.0
    return w


def _top_k_sum(values: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Sum of the ``k[q]`` largest entries of each row (entries are >= 0; padding passed as 0)."""
    csum = np.concatenate([np.zeros((values.shape[0], 1)), np.cumsum(-np.sort(-values, axis=1), axis=1)], axis=1)
    return np.take_along_axis(csum, np.minimum(k, values.shape[1])[:, None], axis=1)[:, 0]


def _cut(grades, mask, k) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Grades of the top-K set (padding -1), the K per query and the top-K mask (None: every entry real)."""
    g_full, m_full = _grades(grades, mask)
    g_top, m_top = prepare(g_full, None if mask is None else m_full, k)
    kk = np.full(g_full.shape[0], k, dtype=np.int64) if k is not None else m_full.sum(axis=1)
    return (g_top if m_top is None else np.where(m_top, g_top, -1)), kk, m_top


def _weighted(grades: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``w_g(d)`` for every entry (padding, grade -1, gets 0)."""
    return np.where(grades >= 0, np.take_along_axis(w, np.clip(grades, 0, None), axis=1), 0.0)


def ra_nwg(grades, mask=None, *, k: int | None = None, pool_grades=None, pool_mask=None, alpha: float = 1.0,
           cap4: float = 1.0, cap3: float = 0.25, base=BASE_UTILITIES, fallback=NO_GRADE5_FALLBACK) -> np.ndarray:
    """RA-nWG@K = G_obs(K) / G_ideal(K) per query (paper Sec. 2.4), NA (NaN) when G_ideal(K) = 0."""
    g_top, kk, _ = _cut(grades, mask, k)
    pg, pm = (grades, mask) if pool_grades is None else (pool_grades, pool_mask)
    if pool_grades is not None:
        _check_pool(grades, mask, pg, pm)
    w = rarity_weights(pg, pm, alpha=alpha, cap4=cap4, cap3=cap3, base=base, fallback=fallback)
    obs = _weighted(g_top, w).sum(axis=1)
    return ratio(obs, _top_k_sum(_weighted(_grades(pg, pm)[0], w), kk), np.nan)


def _n_recall(grades, mask, k, pool_grades, pool_mask, min_grade: int) -> np.ndarray:
    g_top, kk, _ = _cut(grades, mask, k)
    pg, pm = (grades, mask) if pool_grades is None else (pool_grades, pool_mask)
    if pool_grades is not None:
        _check_pool(grades, mask, pg, pm)
    got = (g_top >= min_grade).sum(axis=1)
    r = (_grades(pg, pm)[0] >= min_grade).sum(axis=1)
    return np.where(r > 0, ratio(got, np.minimum(kk, r).astype(np.float64)), np.nan)


def n_recall_4plus(grades, mask=None, *, k: int | None = None, pool_grades=None, pool_mask=None) -> np.ndarray:
    """N-Recall4+@K = #{TopK with grade >= 4} / min(K, R4+), NA when the judged pool has no grade >= 4."""
    return _n_recall(grades, mask, k, pool_grades, pool_mask, 4)


def n_recall_5(grades, mask=None, *, k: int | None = None, pool_grades=None, pool_mask=None) -> np.ndarray:
    """N-Recall5@K = #{TopK with grade 5} / min(K, R5), NA when the judged pool has no grade 5."""
    return _n_recall(grades, mask, k, pool_grades, pool_mask, 5)


def _share(grades, mask, k, select) -> np.ndarray:
    g_top, _, m_top = _cut(grades, mask, k)
    return over_cutoff((select(g_top) & (g_top >= 0)).sum(axis=1), k, g_top, m_top, empty=np.nan)


def precision_4plus(grades, mask=None, *, k: int | None = None) -> np.ndarray:
    """Precision4+@K = #{TopK with grade >= 4} / K (NA for an empty row with ``k=None``)."""
    return _share(grades, mask, k, lambda g: g >= 4)


def harm_at_k(grades, mask=None, *, k: int | None = None, max_grade: int = 2) -> np.ndarray:
    """Harm@K = #{TopK with grade <= 2} / K (paper Sec. 2.2; our grade 0 counts as harm too)."""
    return _share(grades, mask, k, lambda g: g <= max_grade)


def proc(grades, mask=None, *, k: int | None = None, pool_grades=None, pool_mask=None, metric: str = "ra_nwg",
         **weights) -> np.ndarray:
    """PROC@K: the metric of the oracle ordering the row's real entries by descending weight (grade, for
    ``metric="n_recall_4plus"`` or ``"n_recall_5"``, paper Table 3), scored against the same judged pool:
    for RA-nWG ``G_ideal_row(K) / G_ideal(K)``. NA where the metric is NA."""
    fn = _metric_fn(metric)
    g_row, m_row = _grades(grades, mask)
    if pool_grades is None:
        pool_grades, pool_mask = g_row, m_row
    if metric == "ra_nwg":
        # best set = largest weights; with unusual caps (cap4 < cap3) weights need not follow grades
        key = _weighted(g_row, rarity_weights(pool_grades, pool_mask, **weights))
    else:
        key = g_row.astype(np.float64)
    key = np.where(m_row, key, -np.inf)  # padding last
    oracle = np.take_along_axis(g_row, np.argsort(-key, axis=1, kind="stable"), axis=1)
    oracle_mask = oracle >= 0
    return fn(np.where(oracle_mask, oracle, 0), oracle_mask, k=k, pool_grades=pool_grades, pool_mask=pool_mask,
              **weights)


def _metric_fn(metric: str):
    table = {"ra_nwg": ra_nwg, "n_recall_4plus": n_recall_4plus, "n_recall_5": n_recall_5}
    if metric not in table:
        raise ValueError(f"metric must be one of {sorted(table)}, got {metric!r}")
    return table[metric]


def pct_proc(grades, mask=None, *, k: int | None = None, pool_grades=None, pool_mask=None, metric: str = "ra_nwg",
             **weights) -> np.ndarray:
    """%PROC@K = actual / PROC@K, the share of the pool's ceiling the ranking realised (NA: PROC NA or 0)."""
    actual = _metric_fn(metric)(grades, mask, k=k, pool_grades=pool_grades, pool_mask=pool_mask, **weights)
    ceiling = proc(grades, mask, k=k, pool_grades=pool_grades, pool_mask=pool_mask, metric=metric, **weights)
    return ratio(actual, ceiling, np.nan)
