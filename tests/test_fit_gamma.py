"""gamma calibration: recovers the gamma that generated the outcomes; ties go to the paper's 1/3."""

from __future__ import annotations

import numpy as np

from udcg_ltr.fit.gamma import DEFAULT_GAMMA_GRID, calibrate_gamma, plot_gamma_curve
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA, udcg_logit


def world(gamma_true: float, n_queries=200, n_ctx=10, k=5, seed=0):
    rng = np.random.default_rng(seed)
    n = n_queries * n_ctx
    rel = rng.random((n, k)) < 0.35
    u = np.where(rel, rng.uniform(0.2, 1.0, (n, k)), -rng.uniform(0.2, 1.0, (n, k)))
    z = udcg_logit(u, gamma=gamma_true) + rng.logistic(size=n) * 0.02
    outcome = np.digitize(z, np.quantile(z, [0.4, 0.7])).astype(float)  # 0 / 1 / 2
    qids = np.repeat(np.arange(n_queries), n_ctx).astype(str)
    return u, outcome, qids


def test_recovers_generating_gamma():
    for g_true in (0.25, 1.0):
        u, outcome, qids = world(g_true)
        cal = calibrate_gamma(u, None, outcome, qids)
        assert abs(cal.gamma - g_true) <= 0.25, (g_true, cal.gamma)
        assert cal.best_score == np.nanmax(cal.mean_spearman)
        assert cal.n_queries == 200


def test_ties_go_to_the_default():
    # No negative utilities: gamma changes nothing, every grid point ties.
    rng = np.random.default_rng(1)
    u = rng.uniform(0, 1, (60, 3))
    outcome = rng.integers(0, 3, 60).astype(float)
    qids = np.repeat(np.arange(6), 10).astype(str)
    cal = calibrate_gamma(u, None, outcome, qids)
    assert np.allclose(cal.mean_spearman, cal.mean_spearman[0])
    assert cal.gamma == DEFAULT_GAMMA


def test_grid_and_plot(tmp_path):
    assert DEFAULT_GAMMA in DEFAULT_GAMMA_GRID and 0.0 in DEFAULT_GAMMA_GRID
    u, outcome, qids = world(0.5, n_queries=30)
    cal = calibrate_gamma(u, None, outcome, qids, grid=[0.0, 0.5, 2.0])
    assert cal.grid.tolist() == [0.0, 0.5, 2.0] and len(cal.rows()) == 3
    assert plot_gamma_curve(cal, tmp_path / "g.png").stat().st_size > 0
