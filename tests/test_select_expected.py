"""The expected-UDCG selector: exact expectation over sign patterns, its limits, the decision rule."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from udcg_ltr.metrics.udcg import DEFAULT_GAMMA, sigmoid
from udcg_ltr.select.base import prefix_udcg
from udcg_ltr.select.expected import MAX_EXACT_K, ExpectedUtilitySelector, expected_prefix_udcg, sign_patterns


def _t(a):
    return torch.as_tensor(np.asarray(a), dtype=torch.float64)


def test_sign_patterns_enumerate_every_pattern_once():
    s = sign_patterns(3).numpy()
    assert s.shape == (8, 3)
    assert {tuple(r) for r in s} == set(itertools.product([0.0, 1.0], repeat=3))


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, (2, 4), elements=st.floats(0.0, 1.0)), arrays(np.float64, (2, 4), elements=st.floats(0.0, 1.0)),
       st.floats(0.0, 1.0))
def test_expectation_matches_a_brute_force_sum(pi, m, gamma):
    got = expected_prefix_udcg(_t(pi), _t(m), torch.ones(2, 4, dtype=torch.bool), max_k=4, gamma=gamma).numpy()
    for q in range(2):
        assert got[q, 0] == 0.5
        for k in range(1, 5):
            total = 0.0
            for signs in itertools.product([1, 0], repeat=k):
                prob = np.prod([pi[q, i] if s else 1 - pi[q, i] for i, s in enumerate(signs)])
                logit = sum(m[q, i] * (1.0 if s else -gamma) for i, s in enumerate(signs)) / k
                total += prob * sigmoid(logit)
            assert got[q, k] == pytest.approx(total, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, (3, 5), elements=st.floats(-1.0, 1.0).filter(lambda x: abs(x) > 1e-6)))
def test_certain_signs_and_exact_magnitudes_give_the_prefix_udcg_of_eq4(u):
    mask = np.ones(u.shape, bool)
    got = expected_prefix_udcg(_t(u > 0), _t(np.abs(u)), torch.as_tensor(mask), max_k=5).numpy()
    np.testing.assert_allclose(got, prefix_udcg(u, mask, gamma=DEFAULT_GAMMA), atol=1e-9)


@pytest.mark.parametrize("m", [0.05, 0.3, 0.6, 1.0])
def test_the_top_passage_is_dropped_only_below_about_a_quarter(m):
    """k in {0, 1}: keep iff pi sigmoid(m) + (1 - pi) sigmoid(-gamma m) >= 1/2 (module doc)."""
    mask = torch.ones(1, 1, dtype=torch.bool)
    keep = lambda pi: expected_prefix_udcg(_t([[pi]]), _t([[m]]), mask, max_k=1)[0, 1] >= 0.5  # noqa: E731
    assert not keep(0.2) and keep(0.3)


def test_limits_and_padding():
    with pytest.raises(ValueError, match="limited"):
        expected_prefix_udcg(_t(np.zeros((1, 12))), _t(np.zeros((1, 12))), torch.ones(1, 12, dtype=torch.bool),
                             max_k=MAX_EXACT_K + 1)
    with pytest.raises(ValueError, match="max_k"):
        ExpectedUtilitySelector(max_k=MAX_EXACT_K + 1)
    # a padded passage never counts: its probability and magnitude are zeroed
    mask = torch.tensor([[True, False]])
    out = expected_prefix_udcg(_t([[1.0, 1.0]]), _t([[0.8, 0.9]]), mask, max_k=2).numpy()
    assert out[0, 1] == pytest.approx(sigmoid(0.8))
