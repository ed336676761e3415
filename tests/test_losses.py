"""Ranking losses: masking, signed targets, agreement with brute-force definitions, direct UDCG@k."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from udcg_ltr import metrics as M
from udcg_ltr.losses import (
    LOSSES,
    CombinedLoss,
    DirectUDCGLoss,
    LambdaUDCGLoss,
    ListMLELoss,
    ListNetLoss,
    get_loss,
)
from udcg_ltr.losses.direct import neuralsort, soft_topk_weights
from udcg_ltr.losses.listwise import udcg_swap_deltas
from udcg_ltr.metrics.torch_ops import top_k_mask_torch, udcg_torch

ALL = sorted(LOSSES)


def kwargs_for(name, k=3):
    return {"k": k} if name in ("udcg", "lambda_udcg") else {}


def batch(q=4, n=7, seed=0, distinct=True):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(q, n, generator=g)
    if distinct:  # distinct utilities in [-1, 1]: no ties anywhere
        targets = torch.stack([torch.randperm(n, generator=g) for _ in range(q)]).float()
        targets = (targets - (n - 1) / 2) / n * 2 + 0.01 * torch.rand(q, n, generator=g)
    else:
        targets = torch.rand(q, n, generator=g) * 2 - 1
    mask = torch.ones(q, n, dtype=torch.bool)
    for row, length in zip(range(1, q), (5, 3, 6)):
        mask[row, length:] = False
    return scores, targets, mask


# ---- generic properties ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL)
def test_padding_is_invisible(name):
    """Changing scores/targets at padded slots changes neither the loss nor real-slot gradients."""
    scores, targets, mask = batch()
    loss = get_loss(name, **kwargs_for(name))
    s1 = scores.clone().requires_grad_(True)
    l1 = loss(s1, targets, mask)
    l1.backward()
    noisy_s = torch.where(mask, scores, torch.full_like(scores, 50.0))
    noisy_t = torch.where(mask, targets, torch.full_like(targets, -0.9))
    s2 = noisy_s.clone().requires_grad_(True)
    l2 = loss(s2, noisy_t, mask)
    l2.backward()
    assert torch.isfinite(l1)
    assert torch.allclose(l1, l2, atol=1e-5)
    assert torch.allclose(s1.grad, s2.grad, atol=1e-5)
    assert torch.all(s2.grad[~mask] == 0)


@pytest.mark.parametrize("name", ALL)
def test_column_permutation_invariance(name):
    scores, targets, mask = batch(distinct=True)
    perm = torch.randperm(scores.shape[1], generator=torch.Generator().manual_seed(3))
    loss = get_loss(name, **kwargs_for(name))
    a = loss(scores, targets, mask)
    b = loss(scores[:, perm], targets[:, perm], mask[:, perm])
    assert torch.allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("name", ALL)
def test_all_padding_gives_graph_carrying_zero(name):
    scores = torch.randn(2, 4, requires_grad=True)
    loss = get_loss(name, **kwargs_for(name))(scores, torch.zeros(2, 4), torch.zeros(2, 4, dtype=torch.bool))
    loss.backward()
    assert float(loss) == 0.0 and torch.all(scores.grad == 0)


@pytest.mark.parametrize("name", ALL)
def test_single_query_vector_input(name):
    scores, targets, _ = batch(q=1)
    loss = get_loss(name, **kwargs_for(name))
    assert torch.allclose(loss(scores[0], targets[0]), loss(scores, targets))


@pytest.mark.parametrize("name", [n for n in ALL if n not in ("bce",)])
def test_ideal_order_scores_better_than_reversed(name):
    """Scores that order the slate like the targets have lower loss than the reverse order."""
    _, targets, mask = batch(distinct=True)
    loss = get_loss(name, **kwargs_for(name))
    good = 3.0 * targets
    bad = -3.0 * targets
    assert float(loss(good, targets, mask)) < float(loss(bad, targets, mask))


# ---- pointwise ------------------------------------------------------------------------------------

def test_mse_and_bce_match_torch():
    scores, targets, mask = batch()
    m = mask
    mse = get_loss("mse")(scores, targets, mask)
    assert torch.allclose(mse, ((scores - targets) ** 2)[m].mean())
    labels = (targets > 0).float()
    bce = get_loss("bce")(scores, labels, mask)
    assert torch.allclose(bce, F.binary_cross_entropy_with_logits(scores[m], labels[m]))
    # signed utilities are binarised by sign (Eq. 2: sign(u) = R)
    assert torch.allclose(get_loss("bce")(scores, targets, mask), bce)
    with pytest.raises(ValueError):
        get_loss("bce")(scores, torch.full_like(scores, 3.0), mask)


# ---- pairwise -------------------------------------------------------------------------------------

def _brute_pairwise(scores, targets, mask, per_pair, weighted):
    per_query = []
    for q in range(scores.shape[0]):
        num = den = 0.0
        idx = [i for i in range(scores.shape[1]) if mask[q, i]]
        for i, j in itertools.permutations(idx, 2):
            if targets[q, i] > targets[q, j]:
                w = abs(float(targets[q, i] - targets[q, j])) if weighted else 1.0
                num += w * per_pair(float(scores[q, i] - scores[q, j]), float(targets[q, i] - targets[q, j]))
                den += w
        if den > 0:
            per_query.append(num / den)
    return float(np.mean(per_query))


@pytest.mark.parametrize("weighted", [False, True])
def test_ranknet_and_hinge_match_brute_force(weighted):
    scores, targets, mask = batch(distinct=False, seed=5)
    rn = get_loss("ranknet", sigma=2.0, weighted=weighted)(scores, targets, mask)
    exp = _brute_pairwise(scores, targets, mask, lambda d, _: math.log1p(math.exp(-2.0 * d)), weighted)
    assert float(rn) == pytest.approx(exp, rel=1e-5)
    hi = get_loss("hinge", margin=0.5, margin_mode="difference", weighted=weighted)(scores, targets, mask)
    exp = _brute_pairwise(scores, targets, mask, lambda d, td: max(0.0, 0.5 * td - d), weighted)
    assert float(hi) == pytest.approx(exp, rel=1e-5, abs=1e-7)


# ---- listwise -------------------------------------------------------------------------------------

def test_listnet_keeps_signed_targets():
    """softmax(t / tau) is shift-invariant; clamping negatives to 0 would break this."""
    scores, targets, mask = batch(seed=2)
    loss = ListNetLoss(tau=0.5)
    a = loss(scores, targets, mask)
    b = loss(scores, targets - 0.7, mask)  # most targets become negative
    assert torch.allclose(a, b, atol=1e-6)
    # and matches the formula on one query
    s, t = scores[0], targets[0]
    exp = -(torch.softmax(t / 0.5, 0) * torch.log_softmax(s, 0)).sum()
    assert torch.allclose(loss(s, t), exp, atol=1e-6)
    # a harmful passage (negative utility) gets less target mass than a neutral one
    z = loss(torch.zeros(1, 2, requires_grad=True), torch.tensor([[0.0, -0.8]]))
    assert float(z) > 0


def _pl_nll(s, order):
    total = 0.0
    for r in range(len(order)):
        rest = [s[i] for i in order[r:]]
        total += math.log(sum(math.exp(x) for x in rest)) - s[order[r]]
    return total


def test_listmle_matches_plackett_luce():
    scores, targets, mask = batch(seed=7)
    got = ListMLELoss()(scores, targets, mask)
    per = []
    for q in range(scores.shape[0]):
        idx = [i for i in range(scores.shape[1]) if mask[q, i]]
        order = sorted(idx, key=lambda i: -float(targets[q, i]))
        per.append(_pl_nll(scores[q].tolist(), order))
    assert float(got) == pytest.approx(float(np.mean(per)), rel=1e-5)


def _hard_udcg_numpy(scores, utilities, mask, k, gamma=1 / 3):
    order = M.rank_by_scores(scores, mask)
    return M.udcg(M.take_ranked(utilities, order), M.take_ranked(mask, order), k=k, gamma=gamma)


def test_udcg_swap_deltas_match_recomputed_metric():
    scores, targets, mask = batch(seed=11)
    k = 3
    delta = udcg_swap_deltas(scores, targets, mask, k).numpy()
    s, t, m = scores.numpy().astype(np.float64), targets.numpy().astype(np.float64), mask.numpy()
    base = _hard_udcg_numpy(s, t, m, k)
    for q in range(s.shape[0]):
        for i, j in itertools.permutations(np.flatnonzero(m[q]), 2):
            s2 = s[q:q + 1].copy()
            s2[0, [i, j]] = s2[0, [j, i]]
            after = _hard_udcg_numpy(s2, t[q:q + 1], m[q:q + 1], k)[0]
            assert delta[q, i, j] == pytest.approx(abs(after - base[q]), abs=1e-6)


def test_lambda_udcg_ignores_pairs_that_cannot_change_top_k():
    # Slate of 4, k=2: pairs within the top 2 or within the bottom 2 have zero weight.
    scores = torch.tensor([[4.0, 3.0, 2.0, 1.0]], requires_grad=True)
    targets = torch.tensor([[-0.5, 0.2, -0.1, 0.9]])
    loss = LambdaUDCGLoss(k=2)(scores, targets)
    loss.backward()
    d = udcg_swap_deltas(scores, targets, torch.ones(1, 4, dtype=torch.bool), 2)[0]
    assert float(d[0, 1]) == 0.0 and float(d[2, 3]) == 0.0 and float(d[3, 0]) > 0
    # the useful passage at rank 4 is pushed up, the harmful one at rank 1 down
    assert float(scores.grad[0, 3]) < 0 and float(scores.grad[0, 0]) > 0


# ---- direct UDCG ----------------------------------------------------------------------------------

def test_neuralsort_rows_are_distributions_and_sort_at_low_temperature():
    scores, _, mask = batch(seed=4)
    p = neuralsort(scores, mask, tau=1e-3)
    n_real = mask.sum(-1)
    for q in range(scores.shape[0]):
        m = int(n_real[q])
        assert torch.allclose(p[q, :m].sum(-1), torch.ones(m), atol=1e-5)
        assert torch.all(p[q, m:] == 0) and torch.all(p[q, :, ~mask[q]] == 0)
        expected = torch.argsort(torch.where(mask[q], scores[q], torch.tensor(-1e9)), descending=True)[:m]
        assert torch.equal(p[q, :m].argmax(-1), expected)


@pytest.mark.parametrize("relaxation", ["neuralsort", "sigmoid"])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_direct_udcg_approaches_hard_udcg_at_low_temperature(relaxation, k):
    scores, targets, mask = batch(seed=8)
    hard = _hard_udcg_numpy(scores.double().numpy(), targets.double().numpy(), mask.numpy(), k)
    assert np.allclose(udcg_torch(targets, top_k_mask_torch(scores, mask, k)).numpy(), hard, atol=1e-6)
    cold = DirectUDCGLoss(k=k, tau=1e-4, relaxation=relaxation)(scores, targets, mask)
    assert float(cold) == pytest.approx(-hard.mean(), abs=1e-4)
    warm = DirectUDCGLoss(k=k, tau=5.0, relaxation=relaxation)(scores, targets, mask)
    assert abs(float(warm) + hard.mean()) > 1e-4  # a real relaxation, not the hard metric


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-3, 3), min_size=6, max_size=6, unique=True),
       st.lists(st.floats(-1, 1), min_size=6, max_size=6), st.sampled_from(["neuralsort", "sigmoid"]))
def test_direct_udcg_low_temperature_property(raw_scores, raw_utils, relaxation):
    scores = torch.tensor([raw_scores], dtype=torch.float64).float()
    if len(set(scores[0].tolist())) < 6 or np.min(np.abs(np.subtract.outer(raw_scores, raw_scores))
                                                   + np.eye(6) * 9) < 1e-2:
        return  # near-ties: the hard top k is ill-conditioned
    utils = torch.tensor([raw_utils]).float()
    hard = udcg_torch(utils, top_k_mask_torch(scores, None, 3))
    cold = -DirectUDCGLoss(k=3, tau=1e-4, relaxation=relaxation)(scores, utils)
    assert float(cold) == pytest.approx(float(hard), abs=1e-3)


@pytest.mark.parametrize("relaxation", ["neuralsort", "sigmoid"])
@pytest.mark.parametrize("objective", ["udcg", "log_udcg", "logit"])
def test_direct_udcg_gradient_signs(relaxation, objective):
    # k = 2; ranks: B (useful, in), A (harmful, in at the boundary), C (useful, just out), D (harmful, out)
    scores = torch.tensor([[1.0, 2.0, 0.5, -1.0]], requires_grad=True)  # columns: A, B, C, D
    targets = torch.tensor([[-0.8, 0.6, 0.9, -0.7]])
    loss = DirectUDCGLoss(k=2, tau=0.5, relaxation=relaxation, objective=objective)(scores, targets)
    loss.backward()
    g = scores.grad[0]
    assert float(g[2]) < 0  # raising the useful passage outside the top k lowers the loss
    assert float(g[0]) > 0  # raising the harmful passage inside the top k raises it
    # gradient descent on the scores improves the hard UDCG@2
    before = float(udcg_torch(targets, top_k_mask_torch(scores.detach(), None, 2)))
    s = scores.detach().clone().requires_grad_(True)
    opt = torch.optim.SGD([s], lr=0.5)
    for _ in range(50):
        opt.zero_grad()
        DirectUDCGLoss(k=2, tau=0.5, relaxation=relaxation, objective=objective)(s, targets).backward()
        opt.step()
    after = float(udcg_torch(targets, top_k_mask_torch(s.detach(), None, 2)))
    assert after > before
    best = float(torch.sigmoid(torch.tensor((0.9 + 0.6) / 2)))
    assert after == pytest.approx(best, abs=1e-6)


def test_soft_topk_weights_sum_to_k_and_short_slates_take_everything():
    scores, _, mask = batch(seed=9)
    w = soft_topk_weights(scores, mask, 3, tau=0.7, relaxation="neuralsort")
    assert torch.allclose(w.sum(-1), torch.full((4,), 3.0), atol=1e-4)
    assert torch.all((w >= 0) & (w <= 1 + 1e-4))  # within the Sinkhorn tolerance
    assert torch.all(w[~mask] == 0)
    short = torch.tensor([[True, True, False, False]])
    for relaxation in ("neuralsort", "sigmoid"):
        w = soft_topk_weights(torch.randn(1, 4), short, 3, tau=0.1, relaxation=relaxation)
        assert torch.allclose(w, short.float(), atol=1e-5)


def test_udcg_theta_with_equivalent_weights_equals_udcg():
    scores, targets, mask = batch(seed=12)
    k, gamma = 3, 1 / 3
    full = mask.sum(-1) >= k  # UDCG_theta weights are for contexts of exactly k passages
    alpha, beta = M.udcg_equivalent_weights(k, gamma)
    a = DirectUDCGLoss(k=k, tau=0.3)(scores[full], targets[full], mask[full])
    b = DirectUDCGLoss(k=k, tau=0.3, alpha=alpha, beta=beta)(scores[full], targets[full], mask[full])
    assert torch.allclose(a, b, atol=1e-5)
    # positional weights matter: weighting rank 1 only differs
    c = DirectUDCGLoss(k=k, tau=0.3, alpha=[1.0, 0.0, 0.0], beta=[1.0, 0.0, 0.0])(scores[full], targets[full],
                                                                               mask[full])
    assert not torch.allclose(a, c, atol=1e-3)
    with pytest.raises(ValueError):
        DirectUDCGLoss(k=3, relaxation="sigmoid", alpha=alpha, beta=beta)


def test_temperature_annealing():
    loss = DirectUDCGLoss(k=3, tau=1.0, tau_end=0.01)
    assert loss.anneal(0.0) == pytest.approx(1.0)
    assert loss.anneal(0.5) == pytest.approx(0.1)
    assert loss.anneal(1.0) == pytest.approx(0.01)
    assert DirectUDCGLoss(k=3, tau=0.3).anneal(0.9) == pytest.approx(0.3)


# ---- registry -------------------------------------------------------------------------------------

def test_registry_aliases_and_combinations():
    assert isinstance(get_loss("direct_udcg", k=2), DirectUDCGLoss)
    assert isinstance(get_loss("LambdaLoss", k=2), LambdaUDCGLoss)
    assert get_loss("bce").target == "relevance" and get_loss("udcg").target == "utility"
    with pytest.raises(KeyError):
        get_loss("no-such-loss")
    scores, targets, mask = batch()
    combo = get_loss("udcg+listnet", weights=[1.0, 0.25], k=3, listnet={"tau": 0.2})
    assert isinstance(combo, CombinedLoss) and combo.terms[0].k == 3 and combo.terms[1].tau == 0.2
    exp = DirectUDCGLoss(k=3)(scores, targets, mask) + 0.25 * ListNetLoss(tau=0.2)(scores, targets, mask)
    assert torch.allclose(combo(scores, targets, mask), exp)
    same = get_loss("combined", terms=[{"name": "udcg", "k": 3, "tau_end": 0.1},
                                       {"name": "listnet", "weight": 0.25, "tau": 0.2}])
    same.anneal(1.0)
    assert same.terms[0].tau == pytest.approx(0.1)
