"""The differentiable torch metrics agree with the numpy ones on hard masks and have finite gradients."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from udcg_ltr.metrics import dcg, udcg, udcg_logit, udcg_theta

torch = pytest.importorskip("torch")
from udcg_ltr.metrics.torch_ops import dcg_torch, udcg_logit_torch, udcg_theta_torch, udcg_torch  # noqa: E402

batches = st.integers(1, 4).flatmap(lambda q: st.integers(1, 9).flatmap(lambda w: st.tuples(
    hnp.arrays(np.float64, (q, w), elements=st.floats(-1, 1, allow_nan=False)),
    hnp.arrays(np.bool_, (q, w)),
    hnp.arrays(np.float64, (w,), elements=st.floats(0, 2, allow_nan=False)),
    hnp.arrays(np.float64, (w,), elements=st.floats(0, 2, allow_nan=False)),
)))


@settings(max_examples=100, deadline=None)
@given(batches, st.floats(0.0, 2.0), st.sampled_from([None, 1, 3]))
def test_torch_equals_numpy_on_hard_masks(data, gamma, k):
    u, m, alpha, beta = data
    tu, tm = torch.tensor(u), torch.tensor(m)
    np.testing.assert_allclose(udcg_torch(tu, tm, gamma=gamma).numpy(), udcg(u, m, gamma=gamma), atol=1e-12)
    np.testing.assert_allclose(udcg_logit_torch(tu, tm, gamma=gamma).numpy(), udcg_logit(u, m, gamma=gamma),
                               atol=1e-12)
    np.testing.assert_allclose(udcg_theta_torch(tu, torch.tensor(alpha), torch.tensor(beta), tm).numpy(),
                               udcg_theta(u, alpha, beta, m), atol=1e-12)
    np.testing.assert_allclose(dcg_torch(tu, tm, k=k).numpy(), dcg(u, m, k=k), atol=1e-12)
    # without a mask: every column is real
    np.testing.assert_allclose(udcg_torch(tu, gamma=gamma).numpy(), udcg(u, gamma=gamma), atol=1e-12)
    np.testing.assert_allclose(dcg_torch(tu, k=k).numpy(), dcg(u, k=k), atol=1e-12)


@settings(max_examples=50, deadline=None)
@given(batches)
def test_gradients_are_finite(data):
    u, m, alpha, beta = data
    tu = torch.tensor(u, requires_grad=True)
    soft = torch.tensor(m.astype(np.float64) * 0.7 + 0.1, requires_grad=True)  # a relaxed selection
    a = torch.tensor(alpha, requires_grad=True)
    b = torch.tensor(beta, requires_grad=True)
    total = (udcg_torch(tu, soft).sum() + udcg_theta_torch(tu, a, b, soft).sum() + dcg_torch(tu, soft, k=2).sum()
             + udcg_torch(tu, torch.tensor(m)).sum())
    total.backward()
    for t in (tu, soft, a, b):
        assert t.grad is not None and torch.isfinite(t.grad).all()


def test_empty_context_and_gradient_direction():
    u = torch.tensor([[0.5, -0.5, 0.2]], requires_grad=True)
    empty = torch.zeros(1, 3, dtype=torch.bool)
    assert udcg_torch(u, empty).item() == 0.5
    udcg_torch(u).sum().backward()
    # d UDCG / d u_i > 0 for every passage: more utility is always better (slope 1/k or gamma/k)
    assert (u.grad > 0).all()
    assert u.grad[0, 0] == pytest.approx(3 * u.grad[0, 1].item(), rel=1e-6)  # gamma = 1/3 on the negative side
