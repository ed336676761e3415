"""The calibrated expected-UDCG selector: a ranker-free prior on train, a calibration on the deployed ranker's val scores."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_select_learned import FAST, slates_of, synthetic

from udcg_ltr.select import CalibratedUtilitySelector, load_selector
from udcg_ltr.select.base import oracle_k, rank_slates, udcg_of_kept
from udcg_ltr.select.baselines import FixedK
from udcg_ltr.select.expected import expected_prefix_udcg
from udcg_ltr.select.training import (
    fit_best_selector,
    fit_selector,
    fit_selector_with_prior,
    needs_prior_rows,
    select_k,
)


@pytest.fixture(scope="module")
def shifted():
    """The setting the selector is for: the ranker's *train* scores are useless (a weak cross-fitted
    model), its val / test scores are informative (the deployed model); a ranker-free field (here
    ``retrieval_score``, a noisy copy of the signal) means the same thing on every split."""
    rng = np.random.default_rng(7)
    out = {}
    for name, seed, q in (("train", 10, 300), ("val", 11, 150), ("test", 12, 300)):
        s, u, m = synthetic(seed, q=q)
        retrieval = s + rng.normal(scale=1.5, size=s.shape)
        ranker = rng.normal(size=s.shape) if name == "train" else s
        out[name] = (ranker, slates_of(u, m, retrieval=retrieval))
    return out


def _udcg(sel, scores, slates):
    r = rank_slates(scores, slates, extra_fields=tuple(getattr(sel, "extra_features", ())))
    return udcg_of_kept(r.utility, r.mask, sel.select(r)).mean(), r


def test_beats_a_selector_trained_on_untrustworthy_train_scores(shifted):
    (s_tr, sl_tr), (s_va, sl_va), (s_te, sl_te) = shifted["train"], shifted["val"], shifted["test"]
    hp = {**FAST, "extra_features": ["retrieval_score"]}
    calibrated, m = fit_selector("calibrated_utility", s_tr, sl_tr, s_va, sl_va, **hp)
    plain, _ = fit_selector("expected_utility", s_tr, sl_tr, s_va, sl_va, **hp)
    got, r = _udcg(calibrated, s_te, sl_te)
    other, _ = _udcg(plain, s_te, sl_te)
    fixed = udcg_of_kept(r.utility, r.mask, FixedK().fit(rank_slates(s_va, sl_va)).select(r)).mean()
    oracle = udcg_of_kept(r.utility, r.mask, oracle_k(r.utility, r.mask)).mean()
    assert got > fixed + 0.5 * (oracle - fixed), (got, fixed, oracle)
    assert got > other + 0.01, (got, other)  # the plain one learned its score features from noise
    assert (calibrated.select(r) == 0).any() and (calibrated.select(r) >= 2).any()


def test_without_prior_features_it_is_a_platt_calibration_of_the_ranker(shifted):
    (s_tr, sl_tr), (s_va, sl_va), (s_te, sl_te) = shifted["train"], shifted["val"], shifted["test"]
    sel, _ = fit_selector("calibrated_utility", s_tr, sl_tr, s_va, sl_va)
    assert not sel.has_prior and sel.modules == []
    assert sel.calibration_coef.shape == (3,)  # score, gap_top, inv_rank
    got, r = _udcg(sel, s_te, sl_te)
    fixed = udcg_of_kept(r.utility, r.mask, FixedK().fit(rank_slates(s_va, sl_va)).select(r)).mean()
    assert got > fixed + 0.01


def test_calibrated_on_val_and_exact_magnitudes(shifted):
    """In sample, an (intercept-free-penalty) logistic fit matches the mean relevance exactly; magnitudes
    are ``1 - P(NO-RESPONSE)`` (Eq. 2) when the probe is read, and the decision is the argmax of Eq. 4
    in expectation."""
    (s_tr, sl_tr), (s_va, sl_va) = shifted["train"], shifted["val"]
    sel, _ = fit_selector("calibrated_utility", s_tr, sl_tr, s_va, sl_va,
                          **{**FAST, "extra_features": ["retrieval_score", "p_no_response"]})
    r = rank_slates(s_va, sl_va, extra_fields=("retrieval_score", "p_no_response"))
    pi = sel.relevance_probability(r)
    assert pi[r.mask].mean() == pytest.approx((r.utility[r.mask] > 0).mean(), abs=2e-3)
    assert (pi[~r.mask] == 0).all()
    expect = expected_prefix_udcg(torch.as_tensor(pi), torch.as_tensor(1 - r.extra["p_no_response"]),
                                  torch.as_tensor(r.mask), max_k=sel.max_k).numpy()
    np.testing.assert_allclose(sel.expected_udcg(r), expect, atol=1e-9)
    np.testing.assert_array_equal(sel.select(r), expect.argmax(1))
    np.testing.assert_allclose(sel.soft_output(r)[0].numpy(), expect, atol=1e-9)


def test_val_udcg_is_cross_fitted_and_drives_model_selection(shifted):
    """Each val fold is decided by a calibration fitted on the other folds (reproduced here by fitting
    the selector on those rows), and that is the ``val/udcg`` model selection compares."""
    (s_tr, sl_tr), (s_va, sl_va) = shifted["train"], shifted["val"]
    sel, m = fit_selector("calibrated_utility", s_tr, sl_tr, s_va, sl_va, calibration_folds=3, seed=3)
    r = rank_slates(s_va, sl_va)
    assert m["val/udcg_in_sample"] == pytest.approx(udcg_of_kept(r.utility, r.mask, sel.select(r)).mean())
    assert m["val/udcg"] == sel.crossfit_metrics["val/udcg"] == m["fit/calibration/udcg"]
    n = len(s_va)
    u, mask, retr = sl_va.utility, sl_va.mask, sl_va.retrieval_score
    k = np.zeros(n, dtype=int)
    for held in np.array_split(np.random.default_rng(3).permutation(n), 3):
        rest = np.setdiff1d(np.arange(n), held)
        fold_sel, _ = fit_selector("calibrated_utility", s_tr, sl_tr, s_va[rest],
                                   slates_of(u[rest], mask[rest], retrieval=retr[rest]))
        k[held] = select_k(fold_sel, s_va[held], slates_of(u[held], mask[held], retrieval=retr[held]))
    manual = udcg_of_kept(r.utility, r.mask, k)  # ranking permutes columns, rows keep their order
    assert m["val/udcg"] == pytest.approx(manual.mean(), abs=1e-12)
    assert m["val/mean_k"] == pytest.approx(k.mean())
    _, rows = fit_best_selector([("calibrated_utility", {"calibration_folds": 3, "seed": 3}), ("fixed_k", {})],
                                s_tr, sl_tr, s_va, sl_va, progress=False)
    assert rows[0]["val/udcg"] == m["val/udcg"]


@pytest.mark.parametrize("hp", [{}, {"extra_features": ["retrieval_score", "p_no_response"], "hidden": 8, "n_seeds": 2}])
def test_save_load_round_trip(shifted, tmp_path, hp):
    (s_tr, sl_tr), (s_va, sl_va), (s_te, sl_te) = shifted["train"], shifted["val"], shifted["test"]
    sel, _ = fit_selector("calibrated_utility", s_tr, sl_tr, s_va, sl_va, output_dir=tmp_path, **{**FAST, "max_epochs": 5},
                          **hp)
    loaded = load_selector(tmp_path / "selector")
    assert isinstance(loaded, CalibratedUtilitySelector)
    np.testing.assert_array_equal(select_k(loaded, s_te, sl_te), select_k(sel, s_te, sl_te))
    r = rank_slates(s_te, sl_te, extra_fields=tuple(sel.extra_features))
    np.testing.assert_allclose(loaded.relevance_probability(r), sel.relevance_probability(r), atol=1e-6)


def test_errors(shifted):
    (s_tr, sl_tr), (s_va, sl_va) = shifted["train"], shifted["val"]
    with pytest.raises(ValueError, match="calibration rows"):
        fit_selector("calibrated_utility", s_tr, sl_tr)
    with pytest.raises(ValueError, match="calibration_c"):
        CalibratedUtilitySelector(calibration_c=0)
    with pytest.raises(ValueError, match="calibration_folds"):
        CalibratedUtilitySelector(calibration_folds=1)
    with pytest.raises(ValueError, match="unknown features"):
        CalibratedUtilitySelector(calibration_features=["nope"])
    with pytest.raises(RuntimeError, match="not fitted"):
        CalibratedUtilitySelector().select(rank_slates(s_va, sl_va))


def test_jobs_give_the_prior_rows_only_to_kinds_that_need_them(shifted):
    (s_tr, sl_tr), (s_va, sl_va), (s_te, sl_te) = shifted["train"], shifted["val"], shifted["test"]
    assert needs_prior_rows("calibrated_utility") and not needs_prior_rows("gate")
    direct, m1 = fit_selector("calibrated_utility", s_tr, sl_tr, s_va, sl_va)
    via, m2 = fit_selector_with_prior("calibrated_utility", s_va, sl_va, lambda: (s_tr, sl_tr))
    assert m1 == m2
    np.testing.assert_array_equal(select_k(via, s_te, sl_te), select_k(direct, s_te, sl_te))
    with pytest.raises(ValueError, match="prior rows"):
        fit_selector_with_prior("calibrated_utility", s_va, sl_va)

    def never():
        raise AssertionError("a fixed k reads no prior rows")

    fixed, _ = fit_selector_with_prior("fixed_k", s_va, sl_va, never)
    assert fixed.k == FixedK().fit(rank_slates(s_va, sl_va)).k
