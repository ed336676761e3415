"""Per-query Spearman / Kendall (vectorised) against scipy, NA handling, bootstrap CI and paired test."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from udcg_ltr.stats.bootstrap import (
    bootstrap_ci,
    bootstrap_means,
    gap_closed_bootstrap,
    paired_bootstrap_test,
)
from udcg_ltr.stats.correlation import (
    average_ranks,
    kendall_rows,
    per_query_correlations,
    spearman_rows,
)

row = st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5]), st.sampled_from([0.0, 1.0, 2.0]), st.booleans()),
               min_size=1, max_size=9)


@settings(max_examples=150, deadline=None)
@given(st.lists(row, min_size=1, max_size=6))
def test_matches_scipy_row_by_row(rows):
    m = max(len(r) for r in rows)
    x = np.zeros((len(rows), m))
    y = np.zeros((len(rows), m))
    mask = np.zeros((len(rows), m), dtype=bool)
    for i, r in enumerate(rows):
        for j, (a, b, keep) in enumerate(r):
            x[i, j], y[i, j], mask[i, j] = a, b, keep
    rho, tau = spearman_rows(x, y, mask), kendall_rows(x, y, mask)
    for i in range(len(rows)):
        xs, ys = x[i][mask[i]], y[i][mask[i]]
        undefined = len(xs) < 2 or np.all(xs == xs[0]) or np.all(ys == ys[0])
        if undefined:
            assert np.isnan(rho[i]) and np.isnan(tau[i])
        else:
            assert rho[i] == pytest.approx(scipy.stats.spearmanr(xs, ys).statistic, abs=1e-12)
            assert tau[i] == pytest.approx(scipy.stats.kendalltau(xs, ys).statistic, abs=1e-12)


def test_average_ranks_with_ties_and_mask():
    r = average_ranks(np.array([[3.0, 1.0, 3.0, 9.0]]), np.array([[True, True, True, False]]))
    np.testing.assert_allclose(r[0, :3], [2.5, 1.0, 2.5])
    assert np.isnan(r[0, 3])


def test_per_query_grouping_rounding_and_na():
    qids = ["a", "a", "a", "b", "b", "c", "c", "c"]
    outcome = np.array([2, 1, 0, 1, 1, 0, 2, np.nan])
    # query a: 0.1 + 0.2 vs 0.3 differ only by float noise and must tie
    metric = np.array([0.1 + 0.2, 0.3, 0.0, 0.5, 0.7, 1.0, 2.0, 5.0])
    qc = per_query_correlations(qids, metric, outcome)
    assert qc.qids.tolist() == ["a", "b", "c"]
    assert qc.spearman[0] == pytest.approx(scipy.stats.spearmanr([0.3, 0.3, 0.0], [2, 1, 0]).statistic)
    assert np.isnan(qc.spearman[1]) and qc.outcome_constant[1] and not qc.metric_constant[1]
    assert qc.spearman[2] == pytest.approx(1.0) and qc.n_contexts[2] == 2  # the ungraded context is dropped
    nan_metric = metric.copy()
    nan_metric[0] = np.nan  # a context without the metric leaves its query
    assert per_query_correlations(qids, nan_metric, outcome).n_contexts[0] == 2


def test_bootstrap_ci_and_means():
    v = np.array([0.1, 0.5, 0.3, np.nan, 0.9, 0.2])
    lo, hi = bootstrap_ci(v, 2000, seed=1)
    assert lo < np.nanmean(v) < hi
    assert (lo, hi) == bootstrap_ci(v, 2000, seed=1)
    assert bootstrap_means(v, 10).shape == (10,)
    assert np.isnan(bootstrap_ci([np.nan, np.nan])[0])
    # a wider spread gives a wider interval
    lo2, hi2 = bootstrap_ci(np.array([0.1, 0.5, 0.3, 0.9, 0.2]) * 3, 2000, seed=1)
    assert hi2 - lo2 > hi - lo


def test_paired_test_size_under_the_null():
    # Differences symmetric around 0: the test should reject at 5% about 5% of the time.
    rng = np.random.default_rng(42)
    rejections = [paired_bootstrap_test(rng.normal(0, 1, 40), np.zeros(40), 400, seed=s).p_value < 0.05
                  for s in range(300)]
    assert 0.01 <= np.mean(rejections) <= 0.11


def test_paired_test():
    rng = np.random.default_rng(0)
    base = rng.uniform(-0.2, 0.8, 60)
    better = base + 0.15 + rng.normal(0, 0.05, 60)
    t = paired_bootstrap_test(better, base, 2000, seed=0)
    assert t.mean_diff == pytest.approx(np.mean(better - base))
    assert t.p_value < 0.01 and t.lo > 0 and t.n == 60
    same = paired_bootstrap_test(base, base, 500)
    assert same.p_value == 1.0
    a = np.array([0.1, np.nan, 0.3])
    assert paired_bootstrap_test(a, np.array([0.0, 0.2, np.nan])).n == 1
    with pytest.raises(ValueError):
        paired_bootstrap_test(np.ones(3), np.ones(4))


def test_gap_closed():
    """G = (selected - fixed) / (oracle - fixed) over query means; the CI resamples the arrays together."""
    rng = np.random.default_rng(1)
    fixed = rng.uniform(0.4, 0.7, 200)
    oracle = fixed + rng.uniform(0.0, 0.2, 200)  # the per-query best k is never worse
    selected = fixed + 0.4 * (oracle - fixed) + rng.normal(0, 0.01, 200)
    g, lo, hi = gap_closed_bootstrap(selected, fixed, oracle, 1000, seed=0)
    assert g == pytest.approx((selected.mean() - fixed.mean()) / (oracle.mean() - fixed.mean()))
    assert 0.3 < lo < g < hi < 0.5
    assert gap_closed_bootstrap(selected, fixed, oracle, 1000, seed=0) == (g, lo, hi)  # seeded
    assert gap_closed_bootstrap(fixed, fixed, oracle, 200)[0] == 0.0
    assert gap_closed_bootstrap(oracle, fixed, oracle, 200)[:2] == (pytest.approx(1.0), pytest.approx(1.0))
    assert all(np.isnan(gap_closed_bootstrap(selected, fixed, fixed, 200)))  # no oracle gain: no ratio
    with pytest.raises(ValueError):
        gap_closed_bootstrap(np.ones(3), np.ones(3), np.ones(4))
