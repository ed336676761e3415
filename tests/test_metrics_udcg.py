"""UDCG (Eq. 4) and UDCG_theta (Eq. 3): the authors' reference values and the metric's properties."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from udcg_ltr.metrics import (
    DEFAULT_GAMMA,
    passage_utility,
    udcg,
    udcg_equivalent_weights,
    udcg_logit,
    udcg_theta,
)
from udcg_ltr.paths import data_dir

REFERENCE = data_dir() / "udcg_reference" / "dataset_with_udcg.json"


@pytest.mark.shared_data
@pytest.mark.skipif(not REFERENCE.exists(), reason="shared UDCG reference data absent")
def test_reproduces_the_authors_reference_udcg():
    """Reference file: u = (+1 if is_relevant else -1) * (1 - no_res_prob), k = all passages.

    The authors' pipeline (``example_pipeline.sh`` in their repository) writes this file with
    ``--irrelevant_weight -0.333``, i.e. gamma = 0.333, not exactly 1/3: with gamma = 0.333 the
    values reproduce to 1e-9; with gamma = 1/3 they differ by about 4e-5.
    """
    examples = json.loads(REFERENCE.read_text())
    checked = 0
    for ex in examples:
        for llm, expected in ex["udcg"].items():
            rel = np.array([[p["is_relevant"] for p in ex["passages"]]])
            pnr = np.array([[p["models_info"][llm]["no_res_prob"] for p in ex["passages"]]])
            u = passage_utility(rel, pnr)
            assert udcg(u, gamma=0.333)[0] == pytest.approx(expected, abs=1e-9), ex["example_id"]
            assert udcg(u, gamma=1 / 3)[0] == pytest.approx(expected, abs=1e-4)
            checked += 1
    assert checked >= 3


def test_known_value_from_the_definition():
    u = np.array([[0.9, -0.6, 0.3, 0.0]])
    # Eq. 4 by hand: (1/4)(0.9 + 0.3) + (gamma/4)(-0.6) with gamma = 1/3 -> 0.3 - 0.05 = 0.25
    assert udcg_logit(u)[0] == pytest.approx(0.25)
    assert udcg(u)[0] == pytest.approx(1 / (1 + np.exp(-0.25)))
    # empty context: sigmoid(0)
    assert udcg(u, np.zeros_like(u, dtype=bool))[0] == 0.5
    # cutoff: the first two real entries only -> (0.9 + gamma * -0.6) / 2
    assert udcg_logit(u, k=2)[0] == pytest.approx((0.9 - 0.6 * DEFAULT_GAMMA) / 2)


def test_passage_utility_eq2():
    u = passage_utility(np.array([[True, False, True]]), np.array([[0.25, 0.25, 1.0]]))
    assert u.tolist() == [[0.75, -0.75, 0.0]]
    with pytest.raises(ValueError):
        passage_utility(np.array([[True]]), np.array([[1.5]]))


utilities = st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=1, max_size=20)


@settings(max_examples=100, deadline=None)
@given(utilities, st.randoms(use_true_random=False), st.floats(0.0, 2.0))
def test_udcg_is_order_invariant_and_inside_the_unit_interval(u, rnd, gamma):
    a = np.array([u])
    perm = list(range(len(u)))
    rnd.shuffle(perm)
    v = udcg(a, gamma=gamma)
    assert 0.0 < v[0] < 1.0
    assert udcg(a[:, perm], gamma=gamma)[0] == pytest.approx(v[0], abs=1e-15)


@settings(max_examples=100, deadline=None)
@given(utilities, st.data(), st.floats(1e-3, 1.0), st.floats(0.05, 2.0))
def test_udcg_strictly_rises_when_a_utility_rises(u, data, delta, gamma):
    i = data.draw(st.integers(0, len(u) - 1))
    assume(u[i] + delta <= 1.0)
    # the logit moves by >= min(1, gamma) * delta / k >= 2.5e-6, far above float resolution
    before = np.array([u])
    after = before.copy()
    after[0, i] += delta
    assert udcg(after, gamma=gamma)[0] > udcg(before, gamma=gamma)[0]


@settings(max_examples=100, deadline=None)
@given(utilities, st.floats(0.0, 2.0))
def test_udcg_theta_with_uniform_weights_equals_udcg(u, gamma):
    a = np.array([u])
    alpha, beta = udcg_equivalent_weights(len(u), gamma)
    assert np.allclose(alpha, 1 / len(u)) and np.allclose(beta, gamma / len(u))
    assert udcg_theta(a, alpha, beta)[0] == pytest.approx(udcg(a, gamma=gamma)[0], abs=1e-14)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-1, 1, allow_nan=False), st.booleans()), min_size=1, max_size=10),
       st.integers(0, 2**32 - 1), st.sampled_from([None, 1, 3]))
def test_padding_in_the_middle_changes_nothing(entries, seed, k):
    rng = np.random.default_rng(seed)
    u = np.array([[x for x, _ in entries]])
    m = np.array([[keep for _, keep in entries]])
    real = u[m]
    packed = np.zeros((1, u.shape[1]))
    packed[0, :real.size] = real
    packed_mask = np.arange(u.shape[1])[None, :] < real.size
    garbage = np.where(m, u, rng.normal(size=u.shape) * 1e6)  # what sits under the mask is ignored
    alpha = rng.random(u.shape[1])
    beta = rng.random(u.shape[1])
    assert udcg(garbage, m, k=k)[0] == pytest.approx(udcg(packed, packed_mask, k=k)[0], abs=1e-15)
    a = udcg_theta(garbage, alpha, beta, m, k=k)[0]
    b = udcg_theta(packed, alpha, beta, packed_mask, k=k)[0]
    assert a == pytest.approx(b, abs=1e-15)
    # per-query weights are positional too
    a2 = udcg_theta(garbage, alpha[None, :], beta[None, :], m, k=k)[0]
    assert a2 == pytest.approx(b, abs=1e-15)


def test_udcg_theta_positional_weights_matter_and_are_checked():
    u = np.array([[1.0, -1.0]])
    early = udcg_theta(u, np.array([2.0, 0.0]), np.array([0.0, 0.0]))
    late = udcg_theta(u[:, ::-1], np.array([2.0, 0.0]), np.array([0.0, 0.0]))
    assert early[0] > late[0]
    with pytest.raises(ValueError):
        udcg_theta(np.ones((1, 3)), np.ones(2), np.ones(2))
