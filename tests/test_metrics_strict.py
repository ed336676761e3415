"""Strict inputs at the metric boundary, numpy and torch alike: NaN under a False mask is padding and
changes nothing, NaN at a real entry raises ValueError; the signed-gain nDCG stays in [-1, 1];
the trec_eval tie-break of rank_by_scores."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from udcg_ltr import metrics as M

torch = pytest.importorskip("torch")
from udcg_ltr.metrics.torch_ops import dcg_torch, udcg_logit_torch, udcg_theta_torch, udcg_torch  # noqa: E402

# Every numpy metric that reads a [Q, k] array (+ mask), as f(values, mask, k) -> [Q].
NUMPY = {
    "udcg": lambda v, m, k: M.udcg(v, m, k=k),
    "udcg_logit": lambda v, m, k: M.udcg_logit(v, m, k=k),
    "udcg_theta": lambda v, m, k: M.udcg_theta(v, np.linspace(1, 0.1, v.shape[1]), np.linspace(0.5, 0.05, v.shape[1]),
                                               m, k=k),
    "dcg": lambda v, m, k: M.dcg(v, m, k=k),
    "ndcg": lambda v, m, k: M.ndcg(v, m, k=k),
    "ideal_dcg": lambda v, m, k: M.ideal_dcg(v, m, k=k),
    "reciprocal_rank": lambda v, m, k: M.reciprocal_rank(v, m, k=k),
    "average_precision": lambda v, m, k: M.average_precision(v, m, k=k),
    "precision": lambda v, m, k: M.precision(v, m, k=k),
    "recall": lambda v, m, k: M.recall(v, m, k=k),
    "hits": lambda v, m, k: M.hits(v, m, k=k),
    "distractor_aware_dcg": lambda v, m, k: M.distractor_aware_dcg(v, m, k=k),
    "distractor_harm": lambda v, m, k: M.distractor_harm(v, m, k=k),
    "positive_part": lambda v, m, k: M.positive_part(v, m).sum(axis=1),
    "negative_part": lambda v, m, k: M.negative_part(v, m).sum(axis=1),
    "passage_utility": lambda v, m, k: M.passage_utility(np.ones(v.shape), np.abs(v) / 2, m).sum(axis=1),
}


def _t(x):
    return None if x is None else torch.tensor(x)


# The torch twins, f(values, mask) -> numpy [Q]; numpy counterparts in NUMPY.
TORCH = {
    "udcg": lambda v, m, k: udcg_torch(_t(v), _t(m)).numpy(),
    "udcg_logit": lambda v, m, k: udcg_logit_torch(_t(v), _t(m)).numpy(),
    "udcg_theta": lambda v, m, k: udcg_theta_torch(_t(v), _t(np.linspace(1, 0.1, v.shape[1])),
                                                   _t(np.linspace(0.5, 0.05, v.shape[1])), _t(m)).numpy(),
    "dcg": lambda v, m, k: dcg_torch(_t(v), _t(m), k=k).numpy(),
}

padded_batches = st.integers(1, 4).flatmap(lambda q: st.integers(1, 8).flatmap(lambda w: st.tuples(
    hnp.arrays(np.float64, (q, w), elements=st.floats(-1, 1, allow_nan=False)),
    hnp.arrays(np.bool_, (q, w)),
)))
ks = st.sampled_from([None, 1, 3])


@settings(max_examples=80, deadline=None)
@given(padded_batches, ks)
def test_nan_under_the_mask_is_padding_numpy_and_torch(data, k):
    values, mask = data
    clean = np.where(mask, values, 0.0)
    dirty = np.where(mask, values, np.nan)  # garbage only where the mask says padding
    for name, fn in NUMPY.items():
        kk = None if name in ("udcg", "udcg_logit", "udcg_theta") and k is None else k
        np.testing.assert_array_equal(fn(dirty, mask, kk), fn(clean, mask, kk), err_msg=name)
    for name, fn in TORCH.items():
        kk = k if name == "dcg" else None
        got = fn(dirty, mask, kk)
        np.testing.assert_allclose(got, fn(clean, mask, kk), atol=0, err_msg=name)
        # and numpy and torch agree on the same padded input
        np.testing.assert_allclose(got, NUMPY[name](dirty, mask, kk), atol=1e-12, err_msg=name)


@settings(max_examples=60, deadline=None)
@given(padded_batches, st.data())
def test_nan_at_a_real_entry_raises_numpy_and_torch(data, draw):
    values, mask = data
    mask = mask.copy()
    i = draw.draw(st.integers(0, values.shape[0] - 1))
    j = draw.draw(st.integers(0, values.shape[1] - 1))
    mask[i, j] = True
    bad = values.copy()
    bad[i, j] = np.nan
    for fn in NUMPY.values():
        for m in (mask, None):
            with pytest.raises(ValueError, match="NaN"):
                fn(bad, m, None)
            with pytest.raises(ValueError, match="NaN"):  # also when the NaN lies beyond the cutoff
                fn(bad, m, 1)
    for fn in TORCH.values():
        for m in (mask, None):
            with pytest.raises(ValueError, match="NaN"):
                fn(bad, m, None)


def test_the_issue_examples():
    with pytest.raises(ValueError, match="NaN"):
        M.udcg([[np.nan, 0.9]])  # was 0.611
    with pytest.raises(ValueError, match="NaN"):
        M.reciprocal_rank([[np.nan, 1.0]])  # a NaN label was "not relevant"
    with pytest.raises(ValueError, match="NaN"):
        udcg_torch(torch.tensor([[np.nan, 0.9]]))
    masked = torch.tensor([[True, False]])
    assert udcg_torch(torch.tensor([[0.9, np.nan]]), masked).item() == pytest.approx(M.udcg([[0.9]])[0])
    # a soft mask: weight 0 is padding, a positive weight is real
    soft = torch.tensor([[0.5, 0.0]])
    assert torch.isfinite(udcg_torch(torch.tensor([[0.9, np.nan]]), soft)).all()
    with pytest.raises(ValueError, match="NaN"):
        udcg_torch(torch.tensor([[np.nan, 0.9]]), soft)
    with pytest.raises(ValueError, match="NaN"):
        M.udcg_theta([[0.5]], [np.nan], [0.1])
    with pytest.raises(ValueError, match="NaN"):
        M.average_precision([[1.0, 0.0]], n_relevant=[np.nan])


def test_gradients_stay_finite_with_nan_padding():
    u = torch.tensor([[0.5, np.nan, -0.2]], requires_grad=True)
    m = torch.tensor([[True, False, True]])
    (udcg_torch(u, m).sum() + dcg_torch(u, m, k=2).sum()
     + udcg_theta_torch(u, torch.ones(3), torch.ones(3), m).sum()).backward()
    assert torch.isfinite(u.grad).all() and u.grad[0, 1] == 0


# ---- signed-gain nDCG: bounded in [-1, 1] ------------------------------------------------------

signed_rows = st.integers(1, 4).flatmap(lambda q: st.integers(1, 10).flatmap(lambda w: st.tuples(
    hnp.arrays(np.float64, (q, w), elements=st.floats(-5, 5, allow_nan=False).map(lambda x: round(x, 2))),
    hnp.arrays(np.bool_, (q, w)),
    hnp.arrays(np.float64, (q, 4), elements=st.floats(-5, 5, allow_nan=False)),  # pool beyond the row
)))


@settings(max_examples=150, deadline=None)
@given(signed_rows, st.sampled_from([None, 1, 2, 5, 10]))
def test_signed_ndcg_lies_in_minus_one_one_and_hits_both_ends(data, k):
    gains, mask, extra = data
    value = M.ndcg(gains, mask, k=k)
    assert np.all((value >= -1.0) & (value <= 1.0))
    # with a judged pool larger than the row (the row's gains plus more), still within the bound
    pool = np.concatenate([np.where(mask, gains, 0.0), extra], axis=1)
    pool_mask = np.concatenate([mask, np.ones(extra.shape, bool)], axis=1)
    wide = M.ndcg(gains, mask, k=k, ideal_gains=pool, ideal_mask=pool_mask)
    assert np.all((wide >= -1.0) & (wide <= 1.0))
    # both ends are reached: ranking the pool's positives in descending order scores 1, ranking its
    # negatives most negative first scores -1
    for i in range(gains.shape[0]):
        row = gains[i][mask[i]]
        if (row > 0).any():
            best = np.sort(row[row > 0])[::-1][None, :]
            assert M.ndcg(best, k=k, ideal_gains=row[None, :])[0] == pytest.approx(1.0)
        if (row < 0).any():
            worst = np.sort(row[row < 0])[None, :]
            assert M.ndcg(worst, k=k, ideal_gains=row[None, :])[0] == pytest.approx(-1.0)


@settings(max_examples=80, deadline=None)
@given(hnp.arrays(np.float64, (3, 6), elements=st.floats(0, 4, allow_nan=False)), st.sampled_from([None, 2, 5]))
def test_non_negative_gains_give_the_classic_dcg_over_idcg(gains, k):
    idcg = M.ideal_dcg(gains, k=k)
    expected = np.where(idcg > 0, M.dcg(gains, k=k) / np.where(idcg > 0, idcg, 1.0), 0.0)
    np.testing.assert_allclose(M.ndcg(gains, k=k), expected, atol=1e-12)


def test_signed_ndcg_the_issue_case_and_foreign_gains():
    # a tiny positive and large negatives: plain DCG/IDCG gave about -153.6 at k = 10
    gains = np.array([[-5.0, -4.0, -4.0, -3.0, -3.0, -3.0, -2.0, -2.0, -2.0, 0.05]])
    plain = M.dcg(gains, k=10)[0] / M.ideal_dcg(np.where(gains > 0, gains, 0.0), k=10)[0]
    assert plain < -100
    assert -1.0 <= M.ndcg(gains, k=10)[0] < -0.9
    # graded gains against a binary pool (the old table): the row is not the pool's, an error not > 1
    with pytest.raises(ValueError, match="judged pool"):
        M.ndcg([[3.0, 2.0]], ideal_gains=[[1.0, 1.0]])


# ---- ties -----------------------------------------------------------------------------------------

tie_rows = st.integers(1, 4).flatmap(lambda q: st.integers(1, 8).flatmap(lambda w: st.tuples(
    hnp.arrays(np.float64, (q, w), elements=st.sampled_from([0.0, 1.0, 1.0 + 1e-9, 2.0, -np.inf])),
    st.one_of(st.none(), hnp.arrays(np.bool_, (q, w))),
    st.lists(st.text("aB9_", min_size=1, max_size=3), min_size=q * w, max_size=q * w),
    st.one_of(st.none(), st.integers(0, 9)),
)))


@settings(max_examples=150, deadline=None)
@given(tie_rows)
def test_trec_ties_are_score_in_float32_then_docid_descending(data):
    scores, mask, ids, k = data
    ids = np.array(ids, dtype=object).reshape(scores.shape)
    real = np.ones(scores.shape, bool) if mask is None else mask
    order = M.rank_by_scores(scores, mask, ties="trec", ids=ids)
    for i in range(scores.shape[0]):
        # reference by stable sorts, last key first: column, then id descending, then (padding, score as float32)
        ref = sorted(range(scores.shape[1]), key=lambda j: ids[i, j], reverse=True)
        ref = sorted(ref, key=lambda j: (not real[i, j], -float(np.float32(scores[i, j])) if real[i, j] else 0.0))
        assert order[i].tolist() == ref
    if k is not None:
        np.testing.assert_array_equal(M.rank_by_scores(scores, mask, ties="trec", ids=ids, k=k), order[:, :k])


def test_tie_rules_differ_only_in_the_tie_break():
    scores = np.array([[1.0, 2.0, 2.0, 1.0]])
    ids = np.array([["a", "b", "c", "d"]], dtype=object)
    assert M.rank_by_scores(scores).tolist() == [[1, 2, 0, 3]]
    assert M.rank_by_scores(scores, ties="trec", ids=ids).tolist() == [[2, 1, 3, 0]]
    with pytest.raises(ValueError, match="ids"):
        M.rank_by_scores(scores, ties="trec")
    with pytest.raises(ValueError, match="ties"):
        M.rank_by_scores(scores, ties="random")
