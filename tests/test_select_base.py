"""Ranked inputs, UDCG of every prefix, the oracle k and the list features of udcg_ltr.select."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from udcg_ltr import metrics as M
from udcg_ltr.data.padded import pad_scores
from udcg_ltr.select.base import (
    kept_mask,
    mean_udcg_per_k,
    oracle_k,
    prefix_udcg,
    rank_slates,
    udcg_of_kept,
    valid_k,
)
from udcg_ltr.select.features import FeatureScaler, feature_names, passage_features


@st.composite
def padded_rows(draw, max_q=6, max_w=7):
    q = draw(st.integers(1, max_q))
    w = draw(st.integers(1, max_w))
    finite = st.floats(-5, 5, allow_nan=False, width=32)
    scores = draw(arrays(np.float64, (q, w), elements=finite))
    utility = draw(arrays(np.float64, (q, w), elements=st.floats(-1, 1, allow_nan=False, width=32)))
    mask = draw(arrays(np.bool_, (q, w)))
    mask[:, 0] |= ~mask.any(axis=1)  # at least one real passage per row
    gamma = draw(st.sampled_from([1 / 3, 0.5, 1.0]))
    return scores, utility, mask, gamma


@settings(max_examples=60, deadline=None)
@given(padded_rows())
def test_rank_slates_sorts_and_carries(rows):
    scores, utility, mask, _ = rows
    r = rank_slates(scores, mask=mask, utility=utility, extra={"e": scores * 2})
    assert (r.n_real == mask.sum(1)).all()
    for i in range(scores.shape[0]):
        n = mask[i].sum()
        assert r.mask[i, :n].all() and not r.mask[i, n:].any()  # real entries first
        real = r.scores[i, :n]
        assert (np.diff(real) <= 0).all()
        cols = r.order[i, :n]
        assert mask[i, cols].all()
        np.testing.assert_array_equal(r.scores[i, :n], scores[i, cols])
        np.testing.assert_array_equal(r.utility[i, :n], utility[i, cols])
        np.testing.assert_array_equal(r.extra["e"][i, :n], 2 * scores[i, cols])
        assert np.isfinite(r.scores[i]).all()


def test_rank_slates_ties_keep_column_order():
    r = rank_slates(np.array([[1.0, 2.0, 1.0, 2.0]]))
    assert r.order[0].tolist() == [1, 3, 0, 2]


def test_rank_slates_rejects_nan_and_shape_errors():
    with pytest.raises(ValueError):
        rank_slates(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError):
        rank_slates(np.zeros((2, 3)), mask=np.ones((2, 2), bool))
    # NaN under padding is fine
    r = rank_slates(np.array([[np.nan, 1.0]]), mask=np.array([[False, True]]))
    assert r.n_real.tolist() == [1]


@settings(max_examples=80, deadline=None)
@given(padded_rows())
def test_prefix_udcg_matches_metric_at_every_k(rows):
    scores, utility, mask, gamma = rows
    r = rank_slates(scores, mask=mask, utility=utility)
    table = prefix_udcg(r.utility, r.mask, gamma=gamma)
    assert table.shape == (scores.shape[0], scores.shape[1] + 1)
    np.testing.assert_allclose(table[:, 0], 0.5)
    for k in range(scores.shape[1] + 1):
        np.testing.assert_allclose(table[:, k], M.udcg(r.utility, r.mask, k=k, gamma=gamma), atol=1e-12)
        ks = np.full(len(r), k)
        np.testing.assert_allclose(udcg_of_kept(r.utility, r.mask, ks, gamma=gamma), table[:, k], atol=1e-12)


@settings(max_examples=80, deadline=None)
@given(padded_rows())
def test_oracle_k_is_the_smallest_best_prefix(rows):
    scores, utility, mask, gamma = rows
    r = rank_slates(scores, mask=mask, utility=utility)
    k = oracle_k(r.utility, r.mask, gamma=gamma)
    for i in range(len(r)):
        n = int(r.n_real[i])
        values = [M.udcg(r.utility[i:i + 1], r.mask[i:i + 1], k=j, gamma=gamma)[0] for j in range(n + 1)]
        best = max(values)
        assert 0 <= k[i] <= n
        assert values[k[i]] == pytest.approx(best, abs=1e-12)
        assert all(v < best - 1e-12 or j >= k[i] for j, v in enumerate(values))  # nothing smaller is as good


def test_oracle_k_respects_max_k_and_valid_k():
    u = np.array([[-0.2, 0.9, 0.9, -0.1]])  # best prefix is 3 passages (k=3); capped at 1 -> k=0
    m = np.ones_like(u, dtype=bool)
    assert oracle_k(u, m).tolist() == [3]
    assert oracle_k(u, m, max_k=1).tolist() == [0]
    assert valid_k(np.array([[True, True, False]]), max_k=5).tolist() == [[True, True, True, False]]


def test_kept_mask_and_mean_udcg_per_k():
    m = np.array([[True, True, True], [True, False, False]])
    km = kept_mask(m, [2, 3])
    assert km.tolist() == [[True, True, False], [True, False, False]]
    u = np.array([[0.5, -0.5, 0.2], [0.8, 0.0, 0.0]])
    ks = np.array([[0, 0], [1, 1], [3, 1]])
    got = mean_udcg_per_k(u, m, ks)
    expect = [np.mean(udcg_of_kept(u, m, row)) for row in ks]
    np.testing.assert_allclose(got, expect)
    with pytest.raises(ValueError):
        kept_mask(m, [1])


def test_pad_scores_from_lists():
    s, m = pad_scores([[1.0, 2.0], [3.0]])
    assert s.shape == (2, 2) and m.tolist() == [[True, True], [True, False]]


def test_passage_features_definitions():
    r = rank_slates(np.array([[1.0, 3.0, 2.0, 0.0]]), mask=np.array([[True, True, True, False]]),
                    extra={"retrieval": np.array([[0.5, 0.2, 0.9, 7.0]])})
    names = feature_names(extra_features=["retrieval"])
    x = passage_features(r, extra_features=["retrieval"], temperature=1.0)
    assert x.shape == (1, 4, len(names))
    col = {n: x[0, :, i] for i, n in enumerate(names)}
    np.testing.assert_allclose(col["score"][:3], [3, 2, 1])
    np.testing.assert_allclose(col["gap_top"][:3], [0, -1, -2])
    np.testing.assert_allclose(col["diff_prev"][:3], [0, 1, 1])
    np.testing.assert_allclose(col["diff_next"][:3], [1, 1, 0])
    np.testing.assert_allclose(col["minmax"][:3], [1, 0.5, 0])
    p = np.exp([0, -1, -2]) / np.exp([0, -1, -2]).sum()
    np.testing.assert_allclose(col["softmax"][:3], p)
    np.testing.assert_allclose(col["cum_softmax"][:3], np.cumsum(p))
    np.testing.assert_allclose(col["top_margin"][:3], 1.0)
    np.testing.assert_allclose(col["n_real"][:3], 0.75)
    np.testing.assert_allclose(col["retrieval"][:3], [0.2, 0.9, 0.5])  # carried in the reranker's order
    np.testing.assert_allclose(col["retrieval_gap_top"][:3], [-0.7, 0.0, -0.4])
    assert (x[0, 3] == 0).all()  # padding
    with pytest.raises(ValueError):
        feature_names(["nope"])


@settings(max_examples=40, deadline=None)
@given(padded_rows(), st.integers(-50, 50))
def test_relative_features_are_shift_invariant(rows, shift):
    scores, _, mask, _ = rows
    scores = np.round(scores * 64) / 64  # dyadic values: adding an integer shift is exact
    keep = ["gap_top", "diff_prev", "diff_next", "minmax", "softmax", "cum_softmax", "zscore", "top_margin"]
    a = passage_features(rank_slates(scores, mask=mask), keep)
    b = passage_features(rank_slates(scores + shift, mask=mask), keep)
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_scaler():
    x = np.arange(24, dtype=float).reshape(2, 4, 3)
    m = np.array([[True, True, False, False], [True, True, True, True]])
    sc = FeatureScaler().fit(x, m)
    z = sc.transform(x, m)
    np.testing.assert_allclose(z[m].mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(z[m].std(0), 1)
    assert (z[~m] == 0).all()
