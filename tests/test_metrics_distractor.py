"""The distractor-aware view: worked example, heuristic utilities, harm, dynamic k, assessment."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udcg_ltr.metrics import (
    AssessmentThresholds,
    HeuristicConfig,
    assess,
    best_k,
    dcg,
    dcg_without_distractors,
    distractor_analysis,
    distractor_aware_dcg,
    distractor_harm,
    distractor_rate,
    dynamic_k_curve,
    harm_share,
    heuristic_utilities,
)
from udcg_ltr.metrics.distractor import DANGEROUS, RISKY, SAFE

WORKED = np.array([[1.0, 0.5, -0.5, 1.0, 0.0]])


def test_worked_example_of_the_post():
    # DCG = sum u_i / log2(i + 1) = 1 + 0.5/log2(3) - 0.5/2 + 1/log2(5) + 0; the post rounds each term
    # to 3 decimals (1 + 0.316 - 0.25 + 0.431) and prints 1.497 and, without the distractor, 1.747.
    exact = 1 + 0.5 / np.log2(3) - 0.5 / 2 + 1 / np.log2(5)
    got = distractor_aware_dcg(WORKED)[0]
    assert got == pytest.approx(1.497, abs=1e-3)
    assert got == pytest.approx(exact, abs=1e-12)
    without = dcg_without_distractors(WORKED)[0]
    assert without == pytest.approx(1.747, abs=1e-3)
    assert without == pytest.approx(exact + 0.5 / 2, abs=1e-12)
    assert distractor_harm(WORKED)[0] == pytest.approx(without - got, abs=1e-12)
    assert distractor_rate(WORKED)[0] == pytest.approx(1 / 5)


def test_heuristic_rules_in_order():
    labels = np.array([[0, 1, 0, 0, 0, 0, 1]])
    scores = np.array([[10.0, 9.5, 9.0, 8.5, 8.0, 2.0, 1.0]])
    distractor = np.array([[False, False, False, False, False, True, True]])
    u = heuristic_utilities(labels, scores, is_distractor=distractor, config=HeuristicConfig(score_fraction=0.8))
    # rank 1: non-relevant, 10 > 8 -> -0.5; rank 2: relevant +1; rank 3: non-relevant, 9 > 8 -> -0.5;
    # rank 4: 8.5 > 8 -> -0.5; rank 5: 8 is not above 0.8 * 10 and not in the top 3 -> 0; rank 6: known distractor -1;
    # rank 7: relevant wins over the distractor flag -> +1
    assert u.tolist() == [[-0.5, 1.0, -0.5, -0.5, 0.0, -1.0, 1.0]]
    # without scores only the position rule applies to non-relevant passages
    u2 = heuristic_utilities(labels, None)
    assert u2.tolist() == [[-0.5, 1.0, -0.5, 0.0, 0.0, 0.0, 1.0]]
    # graded labels with a threshold; padding gets 0 whatever it holds and takes no rank, so
    # column 3 is rank 3 (relevant: 2 >= 2) and column 4 is rank 4 (outside the top 3)
    mask = np.array([[True, True, False, True, True, True, True]])
    u3 = heuristic_utilities(np.array([[3, 1, 9, 2, 0, 0, 0]]), None, mask, relevant_threshold=2)
    assert u3.tolist() == [[1.0, -0.5, 0.0, 1.0, 0.0, 0.0, 0.0]]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.floats(0.01, 100.0)), min_size=1, max_size=12),
       st.floats(0.1, 100.0), st.floats(-50.0, 50.0), st.floats(0.05, 0.95))
def test_thresholds_are_relative_to_the_top_score(rows, scale, shift, fraction):
    labels = np.array([[r for r, _ in rows]])
    scores = np.array([[s for _, s in rows]])
    ratio = HeuristicConfig(score_fraction=fraction)
    base = heuristic_utilities(labels, scores, config=ratio)
    # "ratio" (s > f * top) ignores the scale of the scores
    np.testing.assert_array_equal(heuristic_utilities(labels, scores * scale, config=ratio), base)
    rng = HeuristicConfig(score_fraction=fraction, score_rule="range")
    base_range = heuristic_utilities(labels, scores, config=rng)
    # "range" ((s - min) / (top - min) > f) ignores shifts and scales
    np.testing.assert_array_equal(heuristic_utilities(labels, (scores + shift) * scale, config=rng), base_range)


def test_ratio_rule_refuses_non_positive_top_scores():
    with pytest.raises(ValueError):
        heuristic_utilities(np.array([[0, 0]]), np.array([[-1.0, -2.0]]))
    u = heuristic_utilities(np.array([[0, 0, 0, 0]]), np.array([[-1.0, -2.0, -9.0, -9.5]]),
                            config=HeuristicConfig(score_rule="range", top_n=0))
    # range: (s - min) / (top - min) = 1, 0.9, 0.06, 0 against f = 0.8
    assert u.tolist() == [[-0.5, -0.5, 0.0, 0.0]]


def test_dynamic_k_and_assessment():
    u = np.array([[1.0, -1.0, 1.0, 0.5, -0.4, -0.4],
                  [-1.0, 0.2, 0.0, 0.0, 0.0, 0.0],
                  [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    curve = dynamic_k_curve(u)
    # cumulative utility minus harm, undiscounted, from j = 0
    np.testing.assert_allclose(curve[0], [0, 1, 0, 1, 1.5, 1.1, 0.7])
    k, score = best_k(u)
    assert k.tolist() == [4, 2, 1]  # smallest maximiser; row 2 never recovers, row 3 ties from j = 1
    assert score.tolist() == pytest.approx([1.5, -0.8, 1.0])
    k0, s0 = best_k(u, min_k=0)
    assert k0[1] == 0 and s0[1] == 0.0  # giving nothing beats a net-harmful context
    assert best_k(u, max_k=3)[0].tolist() == [1, 2, 1]
    # harm weight 0: only gains count; discounted curve
    assert best_k(u, harm_weight=0.0)[0][0] == 4
    np.testing.assert_allclose(dynamic_k_curve(u[:1], discount="log2")[0, :3], [0, 1, 1 - 1 / np.log2(3)])
    # assessment from the harm share of the context (log2-discounted by default)
    share = harm_share(u)
    assert share[2] == 0.0 and share[1] > 0.5
    labels = assess(u, thresholds=AssessmentThresholds(risky_share=0.2, dangerous_share=0.5))
    expected = [DANGEROUS if s >= 0.5 else RISKY if s >= 0.2 else SAFE for s in share]
    assert labels.tolist() == expected and labels[1] == DANGEROUS and labels[2] == SAFE


def test_analysis_and_reports():
    mask = np.array([[True, True, False, True, True, True], [True] * 6])
    u = np.array([[1.0, 0.5, 99.0, -0.5, 1.0, 0.0], [0.0, -1.0, 0.0, 0.0, 1.0, 0.0]])
    a = distractor_analysis(u, mask, k=5)
    # row 0 with its padding removed is the worked example
    assert a.dcg[0] == pytest.approx(distractor_aware_dcg(WORKED)[0])
    assert a.dcg_without_distractors[0] == pytest.approx(dcg_without_distractors(WORKED)[0])
    np.testing.assert_allclose(a.dcg, dcg(u, mask, k=5))
    reports = a.reports(u, mask, qids=["a", "b"])
    assert reports[0].qid == "a" and reports[0].utilities == (1.0, 0.5, -0.5, 1.0, 0.0)
    # row b, undiscounted prefix sums 0, -1, -1, -1, 0: j = 1 already reaches the maximum 0;
    # discounted harm 1/log2(3) outweighs the gain 1/log2(6): DANGEROUS
    assert reports[1].best_k == 1 and reports[1].best_k_score == 0.0
    assert reports[1].harm_share == pytest.approx((1 / np.log2(3)) / (1 / np.log2(3) + 1 / np.log2(6)))
    assert reports[1].assessment == DANGEROUS
    assert reports[0].distractor_rate == pytest.approx(1 / 5)
    assert np.isnan(distractor_rate(u, np.zeros_like(mask))[0])


def test_reports_treat_nan_as_every_metric_does():
    """NaN under a False mask (an unannotated passage masked out) is padding; at a real entry it raises."""
    u = np.array([[1.0, np.nan, -0.5], [np.nan, -1.0, 0.5]])
    mask = ~np.isnan(u)
    reports = distractor_analysis(u, mask, k=3).reports(u, mask)
    assert [r.utilities for r in reports] == [(1.0, -0.5), (-1.0, 0.5)]
    for bad in (None, np.ones_like(mask)):
        with pytest.raises(ValueError, match="NaN at a real entry"):
            distractor_analysis(u, bad, k=3)
        with pytest.raises(ValueError, match="NaN at a real entry"):
            distractor_analysis(np.nan_to_num(u), mask, k=3).reports(u, bad)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=12), st.sampled_from([None, 1, 3, 8]))
def test_harm_identity_and_best_k_maximises(u, k):
    a = np.array([u])
    assert distractor_harm(a, k=k)[0] == pytest.approx(
        dcg_without_distractors(a, k=k)[0] - distractor_aware_dcg(a, k=k)[0], abs=1e-12)
    assert 0.0 <= harm_share(a, k=k)[0] <= 1.0
    kb, sb = best_k(a)
    prefix = np.concatenate([[0.0], np.cumsum(u)])
    assert sb[0] == pytest.approx(prefix[1:].max(), abs=1e-12)
    assert prefix[kb[0]] == pytest.approx(sb[0], abs=1e-12)
    assert np.all(prefix[1:kb[0]] < sb[0])  # the smallest maximiser
