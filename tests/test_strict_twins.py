"""The numpy metrics and their torch twins take the same checks (issue 31): on random valid and invalid inputs
(NaN entries, mask weights of 2.0 / -1.0 / NaN, masks of the wrong shape, negative or fractional cutoffs,
short positional weights, NaN gamma) both give the same values (within 1e-6) or raise the same error class.

The one documented difference is left out of the generated masks: a torch mask may be *soft* (a weight
strictly between 0 and 1, a relaxed selection for the losses), which numpy's boolean masks cannot express."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from udcg_ltr import metrics as M

torch = pytest.importorskip("torch")
from udcg_ltr.metrics.torch_ops import (  # noqa: E402
    dcg_torch,
    top_k_mask_torch,
    udcg_logit_torch,
    udcg_theta_torch,
    udcg_torch,
)

# One entry per twin: (numpy call, torch call), each f(values, mask, k, extra) with numpy inputs.
TWINS = {
    "udcg": (lambda v, m, k, x: M.udcg(v, m, gamma=x["gamma"]),
             lambda v, m, k, x: udcg_torch(_t(v), _t(m), gamma=x["gamma"])),
    "udcg_logit": (lambda v, m, k, x: M.udcg_logit(v, m, gamma=x["gamma"]),
                   lambda v, m, k, x: udcg_logit_torch(_t(v), _t(m), gamma=x["gamma"])),
    "udcg_theta": (lambda v, m, k, x: M.udcg_theta(v, x["alpha"], x["beta"], m),
                   lambda v, m, k, x: udcg_theta_torch(_t(v), _t(x["alpha"]), _t(x["beta"]), _t(m))),
    "dcg": (lambda v, m, k, x: M.dcg(v, m, k=k),
            lambda v, m, k, x: dcg_torch(_t(v), _t(m), k=k)),
    "top_k_mask": (lambda v, m, k, x: M.top_k_mask(v, m, k=k),
                   lambda v, m, k, x: top_k_mask_torch(_t(v), _t(m), k)),
}


def _t(x):
    return None if x is None else torch.tensor(np.asarray(x))


def outcome(fn, *args):
    """``("value", array)`` or ``("error", exception class)``."""
    try:
        return "value", np.asarray(fn(*args), dtype=np.float64)
    except Exception as err:  # noqa: BLE001 -- the class is what is compared
        return "error", type(err)


values_el = st.one_of(st.floats(-1, 1, allow_nan=False), st.just(np.nan))
mask_el = st.sampled_from([0.0, 1.0, 1.0, 1.0, 2.0, -1.0, np.nan])


@st.composite
def cases(draw):
    q, w = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    values = draw(hnp.arrays(np.float64, (q, w), elements=values_el))
    kind = draw(st.sampled_from(["none", "bool", "float", "wrong shape"]))
    mask = {"none": lambda: None,
            "bool": lambda: draw(hnp.arrays(np.bool_, (q, w))),
            "float": lambda: draw(hnp.arrays(np.float64, (q, w), elements=mask_el)),
            "wrong shape": lambda: np.ones((q, w + 1), bool)}[kind]()
    n_weights = draw(st.sampled_from([w, w, 1, w + 2]))
    extra = {"gamma": draw(st.sampled_from([1 / 3, 0.0, 2.0, np.nan])),
             "alpha": draw(hnp.arrays(np.float64, (n_weights,), elements=st.floats(0, 2))),
             "beta": draw(hnp.arrays(np.float64, (n_weights,), elements=st.floats(0, 2)))}
    k = draw(st.sampled_from([None, 0, 1, 3, -1]))
    return values, mask, k, extra


@settings(max_examples=400, deadline=None)
@given(cases(), st.sampled_from(sorted(TWINS)))
def test_numpy_and_torch_twins_agree_or_refuse_alike(case, name):
    values, mask, k, extra = case
    if name == "top_k_mask" and k is None:
        k = 2  # the torch twin needs a cutoff
    np_fn, torch_fn = TWINS[name]
    want, got = outcome(np_fn, values, mask, k, extra), outcome(torch_fn, values, mask, k, extra)
    assert want[0] == got[0], f"{name}: numpy {want}, torch {got}"
    if want[0] == "error":
        assert want[1] is got[1], f"{name}: numpy raised {want[1]}, torch {got[1]}"
    else:
        np.testing.assert_allclose(got[1], want[1], atol=1e-6, err_msg=name)


def test_the_generator_reaches_both_outcomes():
    """The parity test above cannot pass vacuously: the issue's inputs are refused by both, valid ones agree."""
    u = np.array([[0.5, -0.2, 0.9]])
    for mask in ([[2.0, 1.0, 1.0]], [[-1.0, 1.0, 1.0]]):
        with pytest.raises(ValueError, match="mask"):
            M.udcg(u, mask)
        with pytest.raises(ValueError, match="mask"):
            udcg_torch(_t(u), _t(mask))
    with pytest.raises(ValueError, match="NaN"):
        top_k_mask_torch(_t([[np.nan, 1.0]]), None, 1)
    with pytest.raises(ValueError, match="NaN"):
        M.top_k_mask([[np.nan, 1.0]], k=1)
    for bad_k in (-1, 2.5):
        with pytest.raises(ValueError, match="cutoff"):
            dcg_torch(_t(u), k=bad_k)
        with pytest.raises(ValueError, match="cutoff"):
            top_k_mask_torch(_t(u), None, bad_k)
        with pytest.raises(ValueError, match="cutoff"):
            M.dcg(u, k=bad_k)
    with pytest.raises(ValueError, match="mask: shape"):  # was a raw RuntimeError
        udcg_torch(_t(u), torch.ones(1, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="alpha"):
        udcg_theta_torch(_t(u), torch.ones(1), torch.ones(3))
    np.testing.assert_allclose(top_k_mask_torch(_t(u), None, 2).numpy(), M.top_k_mask(u, k=2))
    assert M.top_k_mask(u, k=2).tolist() == [[True, False, True]]


def test_soft_masks_stay_a_torch_feature():
    u = torch.tensor([[0.5, -0.2, 0.9]])
    assert torch.isfinite(udcg_torch(u, torch.tensor([[0.5, 1.0, 0.0]]))).all()
    with pytest.raises(ValueError, match="mask"):
        M.udcg(u.numpy(), [[0.5, 1.0, 0.0]])
    # the losses' path reads nothing back, yet shapes and cutoffs are still checked
    with pytest.raises(ValueError, match="cutoff"):
        top_k_mask_torch(u, None, -1, validate=False)
    assert top_k_mask_torch(u, None, 1, validate=False).tolist() == [[False, False, True]]
