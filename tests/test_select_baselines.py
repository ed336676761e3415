"""Rule baselines and the oracle of udcg_ltr.select.baselines."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from udcg_ltr import metrics as M
from udcg_ltr.select.base import oracle_k, rank_slates, udcg_of_kept
from udcg_ltr.select.baselines import (
    CumulativeUtilityRule,
    FixedK,
    OracleK,
    RelativeThreshold,
    ScoreThreshold,
    normalized_ratio,
)


def random_ranked(seed=0, q=80, w=6, shift=0.0):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(q, w)) + shift
    rel = rng.random((q, w)) < 1 / (1 + np.exp(-2 * s))  # higher score, more often relevant
    u = np.where(rel, 1, -1) * rng.uniform(0.1, 1.0, size=(q, w))
    mask = np.ones((q, w), bool)
    mask[: q // 4, w - 2:] = False
    return rank_slates(s, mask=mask, utility=u)


def test_fixed_k_fit_is_the_best_constant_k():
    r = random_ranked()
    sel = FixedK().fit(r)
    means = [M.udcg(r.utility, r.mask, k=k).mean() for k in range(r.width + 1)]
    assert sel.k == int(np.argmax(means))
    np.testing.assert_allclose(sel.curve, means)
    k = sel.select(r)
    assert (k == np.minimum(sel.k, r.n_real)).all()
    assert FixedK(3).select(r).max() == 3
    with pytest.raises(RuntimeError):
        FixedK().select(r)
    with pytest.raises(ValueError):
        FixedK(-1)


def test_score_threshold_counts_scores_above():
    r = rank_slates(np.array([[3.0, 1.0, 2.0], [-1.0, -2.0, 0.5]]))
    assert ScoreThreshold(1.5).select(r).tolist() == [2, 0]
    assert ScoreThreshold(-1.5).select(r).tolist() == [3, 2]
    assert ScoreThreshold(np.inf).select(r).tolist() == [0, 0]


def test_score_threshold_fit_finds_a_separating_threshold():
    # relevant passages score > 0, the rest < 0: keeping exactly the positives is optimal
    rng = np.random.default_rng(1)
    q, w = 60, 5
    npos = rng.integers(0, 3, size=q)
    s = np.where(np.arange(w)[None] < npos[:, None], rng.uniform(1, 2, (q, w)), rng.uniform(-2, -1, (q, w)))
    u = np.where(s > 0, 0.9, -0.9)
    r = rank_slates(s, utility=u)
    sel = ScoreThreshold().fit(r)
    assert sel.threshold > r.scores[r.utility < 0].max()  # every negative passage is dropped
    best = udcg_of_kept(r.utility, r.mask, oracle_k(r.utility, r.mask)).mean()
    assert udcg_of_kept(r.utility, r.mask, sel.select(r)).mean() == pytest.approx(best)


@settings(max_examples=50, deadline=None)
@given(arrays(np.float64, (4, 5), elements=st.floats(-20, 20, allow_nan=False, width=32)),
       st.floats(-100, 100), st.floats(0.05, 0.99))
def test_relative_threshold_softmax_is_shift_invariant_and_never_empty(s, shift, fraction):
    sel = RelativeThreshold(fraction, normalize="softmax")
    a = sel.select(rank_slates(s))
    b = sel.select(rank_slates(s + shift))
    assert (a == b).all()
    assert (a >= 1).all()  # the top passage always qualifies
    # softmax rule == keep s_i >= s_1 + T log f
    r = rank_slates(s)
    expect = (r.scores >= r.scores[:, :1] + np.log(fraction) - 1e-9).sum(1)
    assert (a == expect).all()


@settings(max_examples=50, deadline=None)
@given(arrays(np.float64, (3, 6), elements=st.floats(-10, 10, allow_nan=False, width=32)),
       st.floats(-30, 30), st.floats(0.1, 10), st.floats(0.0, 1.0))
def test_relative_threshold_minmax_is_affine_invariant(s, shift, scale, fraction):
    # Invariance holds for scores the rule can tell apart. Spreads at rounding-noise level count as a constant row
    # (row_minmax), a floor that cannot be both shift and scale invariant (hypothesis found spread 1.1e-9 at
    # scale 0.5), and a ratio within rounding of the fraction may land on either side after the transform.
    spread = s.max(axis=1) - s.min(axis=1)
    assume(np.all((spread == 0) | (spread > 1e-5 * (1 + np.abs(s).max()))))
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = (s - s.min(axis=1, keepdims=True)) / spread[:, None]
    assume(not np.any(np.abs(ratio - fraction) < 1e-6))
    sel = RelativeThreshold(fraction, normalize="minmax")
    a = sel.select(rank_slates(s))
    b = sel.select(rank_slates(s * scale + shift))
    assert (a == b).all()


def test_relative_threshold_with_negative_logits():
    # raw ratios s_i / s_1 would flip for a negative top score; the normalised ones do not
    r = rank_slates(np.array([[-1.0, -1.2, -5.0, -6.0]]))
    ratio = normalized_ratio(r.scores, r.mask, "softmax")
    assert ratio[0, 0] == 1.0 and (np.diff(ratio[0]) <= 0).all()
    assert RelativeThreshold(0.7, normalize="softmax").select(r).tolist() == [2]
    assert RelativeThreshold(0.7, normalize="minmax").select(r).tolist() == [2]
    assert RelativeThreshold(0.5, normalize="sigmoid").select(r).tolist() == [2]
    with pytest.raises(ValueError):
        RelativeThreshold(0.5, normalize="ratio")


def test_relative_threshold_fit_searches_normalisations():
    r = random_ranked(2)
    sel = RelativeThreshold(normalize=None).fit(r)
    assert sel.normalize in RelativeThreshold.NORMALIZERS and 0 < sel.fraction <= 1
    got = udcg_of_kept(r.utility, r.mask, sel.select(r)).mean()
    for norm in RelativeThreshold.NORMALIZERS:  # at least as good as every single normalisation's own fit
        other = RelativeThreshold(normalize=norm).fit(r)
        assert got >= udcg_of_kept(r.utility, r.mask, other.select(r)).mean() - 1e-12


def test_cumulative_utility_rule_is_labels_free_and_follows_best_k():
    s = np.array([[5.0, 4.9, 0.1, 0.0], [0.3, 0.2, 0.1, 0.0]])
    u = np.array([[0.9, 0.8, -0.5, -0.5], [-0.9, -0.9, -0.9, -0.9]])
    sel = CumulativeUtilityRule(relevant_fraction=1.0, relevant_rule="raw", top_n=0, harm_weight=1.0)
    with_labels = sel.select(rank_slates(s, utility=u))
    without = sel.select(rank_slates(s))
    flipped = sel.select(rank_slates(s, utility=-u))
    assert with_labels.tolist() == without.tolist() == flipped.tolist()
    # row 0: two pseudo-relevant passages (+1 each), the others high-ish scores? no: range rule puts
    # 0.1 and 0.0 below 0.8 of the range -> 0; best k = 2. Row 1: nothing pseudo-relevant -> k = 0.
    assert without.tolist() == [2, 0]


def test_cumulative_utility_rule_fit_beats_or_matches_fixed_k_on_its_data():
    r = random_ranked(3, q=60)
    fixed = FixedK().fit(r)
    rule = CumulativeUtilityRule(n_grid=15).fit(r)
    assert rule.relevant_rule in CumulativeUtilityRule.RULES
    got = udcg_of_kept(r.utility, r.mask, rule.select(r)).mean()
    base = udcg_of_kept(r.utility, r.mask, fixed.select(r)).mean()
    assert got >= base - 1e-12 or fixed.k > 3  # the rule can express k=1 and k=0 everywhere


def test_oracle_upper_bounds_every_selector():
    r = random_ranked(4)
    oracle = OracleK()
    assert oracle.needs_labels
    best = udcg_of_kept(r.utility, r.mask, oracle.select(r))
    for sel in (FixedK().fit(r), ScoreThreshold().fit(r), RelativeThreshold(normalize=None).fit(r),
                CumulativeUtilityRule(n_grid=10).fit(r)):
        per_query = udcg_of_kept(r.utility, r.mask, sel.select(r))
        assert (per_query <= best + 1e-12).all()
    with pytest.raises(ValueError):
        oracle.select(rank_slates(r.scores, mask=r.mask))


def test_selectors_never_exceed_the_real_count():
    r = random_ranked(5)
    for sel in (FixedK(10), ScoreThreshold(-np.inf), RelativeThreshold(0.0, normalize="minmax"),
                CumulativeUtilityRule(relevant_fraction=-np.inf, relevant_rule="raw"), OracleK()):
        k = sel.select(r)
        assert (k >= 0).all() and (k <= r.n_real).all(), sel
