"""RA-nWG@K and its family (Dallaire 2025, arXiv:2511.09545, Sec. 2.4): known values and properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udcg_ltr.metrics import (
    harm_at_k,
    n_recall_4plus,
    n_recall_5,
    pct_proc,
    precision_4plus,
    proc,
    ra_nwg,
    rarity_weights,
)

POOL = np.array([[5, 4, 4, 3, 3, 3, 2, 1]])
TOP4 = np.array([[4, 3, 3, 3]])


def test_ra_nwg_at_4_known_value():
    """Worked example of the foundation issue: alpha = 1, cap4 = 1.0, cap3 = 0.25.

    Formula (paper Sec. 2.4): r_g = b_g / p_g^alpha with b5 = 1, b4 = 0.5, b3 = 0.1, p_g = n_g / N;
    w5 = 1, w4 = min(r4 / r5, cap4), w3 = min(r3 / r5, cap3).
    Pool [5,4,4,3,3,3,2,1]: N = 8, n5 = 1, n4 = 2, n3 = 3.
      r5 = 1 / (1/8) = 8;  r4 = 0.5 / (2/8) = 2;  r3 = 0.1 / (3/8) = 4/15.
      w4 = min(2 / 8, 1.0) = 1/4;  w3 = min((4/15) / 8, 0.25) = 1/30.
    G_obs(4)   = w4 + 3 w3 = 1/4 + 3/30 = 0.35                 (top-4 = [4,3,3,3])
    G_ideal(4) = w5 + 2 w4 + w3 = 1 + 1/2 + 1/30 = 23/15       (best 4 of the pool: 5,4,4,3)
    RA-nWG@4   = 0.35 / (23/15) = 21/92 = 0.22826...
    """
    w4, w3 = 1 / 4, 1 / 30
    expected = (w4 + 3 * w3) / (1 + 2 * w4 + w3)
    assert expected == pytest.approx(21 / 92)
    got = ra_nwg(TOP4, k=4, pool_grades=POOL, alpha=1.0, cap4=1.0, cap3=0.25)
    assert got[0] == pytest.approx(expected, abs=1e-12)
    w = rarity_weights(POOL)[0]
    assert w.tolist() == pytest.approx([0, 0, 0, w3, w4, 1.0])


def test_the_same_pool_as_a_ranked_row_gives_the_same_value():
    # the row is the whole pool, ranked so that the top 4 are [4, 3, 3, 3]: pool defaults to the row
    row = np.array([[4, 3, 3, 3, 5, 4, 2, 1]])
    assert ra_nwg(row, k=4)[0] == pytest.approx(21 / 92)
    # PROC: the best 4 of this row are 5,4,4,3 -> the ceiling is 1; %PROC = RA-nWG / PROC
    assert proc(row, k=4)[0] == pytest.approx(1.0)
    assert pct_proc(row, k=4)[0] == pytest.approx(21 / 92)


def test_proc_with_a_retrieval_pool_smaller_than_the_judged_pool():
    # retrieved [3, 4, 1, 2]; judged pool also holds the unretrieved 5 and 4
    row = np.array([[3, 4, 1, 2]])
    pool = np.array([[5, 4, 4, 3, 2, 1]])  # n5 = 1, n4 = 2, n3 = 1 -> w4 = 1/4, w3 = min(0.1, .25) = 0.1
    w4, w3 = 0.5 * 1 / 2, 0.1 * 1 / 1
    ideal2 = 1 + w4  # 5 and a 4
    assert ra_nwg(row, k=2, pool_grades=pool)[0] == pytest.approx((w3 + w4) / ideal2)
    # the oracle over the row can only pick 4 and 3: the same set as the ranking here
    assert proc(row, k=2, pool_grades=pool)[0] == pytest.approx((w4 + w3) / ideal2)
    assert pct_proc(row, k=2, pool_grades=pool)[0] == pytest.approx(1.0)
    # at k = 1 the ranking picked the 3, the oracle the 4
    assert proc(row, k=1, pool_grades=pool)[0] == pytest.approx(w4 / 1.0)
    assert pct_proc(row, k=1, pool_grades=pool)[0] == pytest.approx(w3 / w4)
    # N-Recall4+ ceiling: one of R4+ = 3 items can be placed in the top 2 -> 1 / min(2, 3)
    assert proc(row, k=2, pool_grades=pool, metric="n_recall_4plus")[0] == pytest.approx(1 / 2)


def test_no_grade5_fallback():
    # pool without a 5: w5 = 1, w4 = 1, w3 = 0.2 whatever the prevalence
    pool = np.array([[4, 4, 4, 3, 2]])
    assert rarity_weights(pool)[0].tolist() == pytest.approx([0, 0, 0, 0.2, 1.0, 1.0])
    top = np.array([[3, 2]])
    assert ra_nwg(top, k=2, pool_grades=pool)[0] == pytest.approx(0.2 / 2.0)


def test_alpha_zero_removes_rarity_and_caps_bind():
    pool = np.array([[5, 5, 5, 4, 3]])
    w = rarity_weights(pool, alpha=0.0)[0]
    assert w[4] == pytest.approx(0.5) and w[3] == pytest.approx(0.1)  # b_g / b_5
    w_rare = rarity_weights(pool, alpha=1.0)[0]
    # r4 / r5 = 0.5 * 3 / 1 = 1.5 -> capped at 1.0; r3 / r5 = 0.1 * 3 = 0.3 -> capped at 0.25
    assert w_rare[4] == pytest.approx(1.0) and w_rare[3] == pytest.approx(0.25)
    w_alpha2 = rarity_weights(np.array([[5, 4, 4, 3, 3, 3]]), alpha=2.0)[0]
    assert w_alpha2[4] == pytest.approx(0.5 * (1 / 2) ** 2) and w_alpha2[3] == pytest.approx(0.1 * (1 / 3) ** 2)


def test_na_where_undefined_and_coverage_kpis():
    pool = np.array([[2, 1, 0, 1], [5, 4, 3, 0]])
    assert np.isnan(ra_nwg(pool, k=2)[0])  # nothing with positive weight: G_ideal = 0
    assert np.isnan(n_recall_4plus(pool, k=2)[0]) and np.isnan(n_recall_5(pool, k=2)[0])
    assert np.isnan(pct_proc(pool, k=2)[0])
    ranked = np.array([[0, 4, 3, 5]])
    # R4+ = 2 (the 4 and the 5), top-3 holds the 4: 1 / min(3, 2)
    assert n_recall_4plus(ranked, k=3)[0] == pytest.approx(1 / 2)
    assert n_recall_5(ranked, k=3)[0] == 0.0 and n_recall_5(ranked, k=4)[0] == 1.0
    assert precision_4plus(ranked, k=3)[0] == pytest.approx(1 / 3)
    assert harm_at_k(ranked, k=3)[0] == pytest.approx(1 / 3)  # the 0 counts as harm (grade <= 2)
    # K divides even when the row is shorter than K (paper: Harm@K = #/K)
    assert harm_at_k(np.array([[1]]), k=4)[0] == pytest.approx(1 / 4)


def test_masks_and_validation():
    row = np.array([[4, 9, 3, 5]])
    mask = np.array([[True, False, True, True]])  # the 9 is padding, never validated nor counted
    packed = np.array([[4, 3, 5]])
    for fn in (ra_nwg, n_recall_4plus, n_recall_5, precision_4plus, harm_at_k, proc, pct_proc):
        assert fn(row, mask, k=2)[0] == pytest.approx(fn(packed, k=2)[0], nan_ok=True), fn.__name__
    with pytest.raises(ValueError):
        ra_nwg(np.array([[6, 1]]))
    with pytest.raises(ValueError):
        ra_nwg(np.array([[2.5, 1]]))
    with pytest.raises(ValueError):
        proc(np.array([[5, 1]]), metric="ndcg")


graded_rows = st.lists(st.integers(0, 5), min_size=1, max_size=15)


@settings(max_examples=150, deadline=None)
@given(graded_rows, st.integers(1, 15), st.randoms(use_true_random=False),
       st.floats(0.0, 3.0), st.floats(0.0, 1.5), st.floats(0.0, 0.5))
def test_bounds_order_freedom_and_ceiling(row, k, rnd, alpha, cap4, cap3):
    g = np.array([row])
    kw = dict(alpha=alpha, cap4=cap4, cap3=cap3)
    v = ra_nwg(g, k=k, **kw)[0]
    ceiling = proc(g, k=k, **kw)[0]
    if np.isnan(v):
        assert np.isnan(ceiling)
        return
    assert 0.0 <= v <= 1.0 + 1e-12
    # the row is its own pool: the oracle reaches the ideal
    assert ceiling == pytest.approx(1.0)
    assert 0.0 <= pct_proc(g, k=k, **kw)[0] <= 1.0 + 1e-12
    # order-free: shuffling inside the top k and inside the tail changes nothing
    kk = min(k, len(row))
    head, tail = row[:kk], row[kk:]
    rnd.shuffle(head)
    rnd.shuffle(tail)
    assert ra_nwg(np.array([head + tail]), k=k, **kw)[0] == pytest.approx(v, abs=1e-12)
    w = rarity_weights(g, **kw)[0]
    assert w[5] == 1.0 and w[4] <= max(cap4, 1.0) and w[:3].tolist() == [0, 0, 0]


@settings(max_examples=100, deadline=None)
@given(graded_rows, graded_rows, st.integers(1, 10))
def test_proc_bounds_actual_with_a_larger_judged_pool(row, unretrieved, k):
    g = np.array([row])
    pool = np.array([row + unretrieved])
    actual = ra_nwg(g, k=k, pool_grades=pool)[0]
    ceiling = proc(g, k=k, pool_grades=pool)[0]
    if np.isnan(actual):
        return
    assert actual <= ceiling + 1e-12 <= 1.0 + 2e-12
    nr = n_recall_4plus(g, k=k, pool_grades=pool)[0]
    if not np.isnan(nr):
        assert 0.0 <= nr <= proc(g, k=k, pool_grades=pool, metric="n_recall_4plus")[0] + 1e-12
