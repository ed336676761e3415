"""The learned selectors: the smooth UDCG relaxations, the gate and k-classifier, saving and fit_selector."""

from __future__ import annotations

import copy
import itertools
import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from udcg_ltr import metrics as M
from udcg_ltr.data.padded import PaddedSlates
from udcg_ltr.select import load_selector, save_selector
from udcg_ltr.select.base import oracle_k, prefix_udcg, rank_slates, udcg_of_kept
from udcg_ltr.select.baselines import FixedK
from udcg_ltr.select.features import passage_features
from udcg_ltr.select.gate import GateModule, GateSelector, prefix_length_distribution, prefix_weights
from udcg_ltr.select.io import make_selector, read_selector_config
from udcg_ltr.select.kclassifier import KClassifierSelector
from udcg_ltr.select.nn import SelectorTraining, soft_udcg, train_module
from udcg_ltr.select.training import fit_best_selector, fit_selector, group_kfold, refit_selector, select_k

FAST = dict(max_epochs=60, patience=20, batch_size=32, lr=0.03)
LR = {"gate": 0.1, "kclassifier": 0.03, "expected_utility": 0.03}  # the soft-mask gate learns slowly at 0.03 in 60 epochs


# ---- relaxations ---------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, (3, 5), elements=st.floats(-1, 1, allow_nan=False, width=32)),
       arrays(np.bool_, (3, 5)), st.sampled_from([1 / 3, 1.0]))
def test_soft_udcg_is_eq4_on_hard_masks_including_empty(u, keep, gamma):
    got = soft_udcg(torch.tensor(u), torch.tensor(keep, dtype=torch.float64), gamma=gamma).numpy()
    np.testing.assert_allclose(got, M.udcg(u, keep, gamma=gamma), atol=1e-9)
    assert np.all(got[~keep.any(1)] == 0.5)


def test_soft_udcg_is_continuous_towards_the_empty_set():
    u = torch.tensor([[0.8, -0.6]])
    values = [float(soft_udcg(u, torch.tensor([[eps, eps]]))) for eps in (1e-1, 1e-3, 1e-6)]
    assert abs(values[-1] - 0.5) < 1e-5 and abs(values[0] - 0.5) > abs(values[-1] - 0.5)


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, (2, 5), elements=st.floats(-6, 6, allow_nan=False, width=32)),
       st.integers(1, 5), st.sampled_from(["cumprod", "last"]))
def test_prefix_weights_monotone_and_distribution_consistent(z, n, prefix):
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[:, :n] = True
    logits = torch.tensor(z)
    w = prefix_weights(logits, mask, prefix)
    assert (w >= -1e-12).all() and (w <= 1 + 1e-12).all()
    assert (w[:, 1:] <= w[:, :-1] + 1e-12).all()  # a prefix: weights never increase
    assert (w[~mask] == 0).all()
    p = prefix_length_distribution(logits, mask, prefix)
    np.testing.assert_allclose(p.sum(-1).numpy(), 1.0, atol=1e-9)
    assert (p[:, n + 1:] == 0).all()
    # w_i = P(K >= i)
    tail = torch.flip(torch.cumsum(torch.flip(p, [-1]), -1), [-1])[:, 1:]
    np.testing.assert_allclose(tail.numpy(), w.numpy(), atol=1e-9)


@pytest.mark.parametrize("prefix", ["cumprod", "last"])
def test_prefix_length_distribution_matches_enumeration(prefix):
    rng = np.random.default_rng(0)
    n = 4
    g = 1 / (1 + np.exp(-rng.normal(size=n)))
    mask = torch.ones(1, n, dtype=torch.bool)
    p = prefix_length_distribution(torch.tensor(np.log(g / (1 - g)))[None], mask, prefix)[0].numpy()
    expect = np.zeros(n + 1)
    for bits in itertools.product([0, 1], repeat=n):
        prob = np.prod([g[i] if b else 1 - g[i] for i, b in enumerate(bits)])
        if prefix == "cumprod":
            k = next((i for i, b in enumerate(bits) if not b), n)  # first gate that says stop
        else:
            k = max((i + 1 for i, b in enumerate(bits) if b), default=0)  # last gated-in passage
        expect[k] += prob
    np.testing.assert_allclose(p, expect, atol=1e-12)


# ---- learning a synthetic task -------------------------------------------------------------------
def synthetic(seed: int, q: int = 240, w: int = 6):
    """Relevant passages score high and form a prefix of 0..3 passages, with decreasing utilities.

    The best k is the number of leading passages whose utility beats the running mean: a fixed k
    cannot do it (a third of the queries want k = 0), the scores tell it.
    """
    rng = np.random.default_rng(seed)
    npos = rng.choice([0, 1, 2], size=q, p=[0.35, 0.4, 0.25])
    pos = np.arange(w)[None] < npos[:, None]
    s = np.where(pos, rng.uniform(1.0, 2.0, (q, w)), rng.uniform(-2.0, 0.5, (q, w)))
    u = np.where(pos, rng.uniform(0.6, 1.0, (q, w)), -rng.uniform(0.3, 1.0, (q, w)))
    mask = np.ones((q, w), bool)
    cols = rng.permuted(np.tile(np.arange(w), (q, 1)), axis=1)  # columns in a random order
    take = lambda a: np.take_along_axis(a, cols, axis=1)  # noqa: E731
    return take(s), take(u), mask


def slates_of(u, mask, retrieval=None):
    q, w = u.shape
    return PaddedSlates(qids=[str(i) for i in range(q)], pids=np.array([[f"{i}-{j}" for j in range(w)]
                                                                          for i in range(q)], dtype=object),
                        mask=mask, relevance=(u > 0).astype(float), relevant=u > 0,
                        retrieval_score=retrieval if retrieval is not None else np.zeros((q, w)),
                        retrieval_rank=np.tile(np.arange(1, w + 1), (q, 1)), p_no_response=1 - np.abs(u),
                        utility=u, is_distractor=np.zeros((q, w), bool), n_relevant=(u > 0).sum(1).astype(float))


@pytest.fixture(scope="module")
def task():
    tr, va, te = synthetic(0), synthetic(1, q=120), synthetic(2, q=200)
    return {name: (s, slates_of(u, m)) for name, (s, u, m) in zip(("train", "val", "test"), (tr, va, te))}


def _test_udcg(sel, task):
    s, sl = task["test"]
    r = rank_slates(s, sl)
    return udcg_of_kept(r.utility, r.mask, sel.select(r)).mean(), r


@pytest.mark.parametrize("kind,hp", [
    ("gate", dict(objective="soft_mask")),
    ("gate", dict(objective="expected")),
    ("kclassifier", dict(arch="cumulative", objective="expected")),
    ("kclassifier", dict(arch="linear", objective="cross_entropy")),
    ("expected_utility", dict(hidden=0)),
])
def test_learned_selectors_beat_fixed_k_and_approach_the_oracle(task, kind, hp):
    (s_tr, sl_tr), (s_va, sl_va) = task["train"], task["val"]
    sel, metrics = fit_selector(kind, s_tr, sl_tr, s_va, sl_va, **{**FAST, "lr": LR[kind]}, **hp)
    got, r = _test_udcg(sel, task)
    fixed = FixedK().fit(rank_slates(s_va, sl_va))
    base = udcg_of_kept(r.utility, r.mask, fixed.select(r)).mean()
    oracle = udcg_of_kept(r.utility, r.mask, oracle_k(r.utility, r.mask)).mean()
    assert got > base + 0.5 * (oracle - base), (got, base, oracle)
    assert {"train/udcg", "val/udcg", "val/mean_k", "fit/epochs_run"} <= set(metrics)
    k = sel.select(r)
    assert (k >= 0).all() and (k <= r.n_real).all() and (k == 0).any()


def test_gate_inclusion_is_a_prefix_and_matches_select(task):
    s, sl = task["train"]
    sel, _ = fit_selector("gate", s, sl, **{**FAST, "max_epochs": 10})
    r = rank_slates(*task["test"])
    w = sel.soft_output(r)[0].numpy()
    assert (np.diff(w, axis=1) <= 1e-6).all()
    assert ((w >= 0.5).sum(1) == sel.select(r)).all()


def test_seed_ensemble_averages_the_modules(task):
    s, sl = task["train"]
    sel, _ = fit_selector("kclassifier", s, sl, n_seeds=3, **{**FAST, "max_epochs": 5})
    assert len(sel.modules) == 3
    r = rank_slates(*task["test"])
    from udcg_ltr.select.nn import as_tensors

    batch = as_tensors(sel.arrays(r))
    with torch.no_grad():
        each = [m.soft_output(batch).numpy() for m in sel.modules]
    assert not np.allclose(each[0], each[1])  # different seeds, different modules
    np.testing.assert_allclose(sel.soft_output(r)[0].numpy(), np.mean(each, axis=0), rtol=1e-6)
    assert (sel.select(r) == np.mean(each, axis=0).argmax(1)).all()
    with pytest.raises(ValueError, match="n_seeds must be >= 1, got 0"):
        SelectorTraining(n_seeds=0)
    with pytest.raises(ValueError, match="n_seeds"):
        make_selector("kclassifier", n_seeds=0)  # flat keys, as configurations and selector.json hold them


def test_kclassifier_respects_max_k_and_short_rows(task):
    s, sl = task["train"]
    sel, _ = fit_selector("kclassifier", s, sl, max_k=2, **{**FAST, "max_epochs": 10})
    r = rank_slates(*task["test"])
    assert sel.select(r).max() <= 2
    short = rank_slates(np.array([[1.5, -1.0]]))  # a row narrower than max_k... and one wider, below
    assert 0 <= sel.select(short)[0] <= 2
    p = sel.soft_output(r)[0].numpy()
    assert p.shape == (len(r), 3)
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("kind", ["gate", "expected_utility", "calibrated_utility"])
def test_inference_runs_the_modules_in_eval_mode(task, kind):
    """A module left in train mode (trained or loaded elsewhere) drops no units at inference."""
    (s, sl), (s_va, sl_va) = task["train"], task["val"]
    sel, _ = fit_selector(kind, s, sl, s_va, sl_va, **{**FAST, "max_epochs": 2}, hidden=16, dropout=0.5,
                          extra_features=["retrieval_score"])
    r = rank_slates(*task["test"], extra_fields=("retrieval_score",))

    def soft(r):
        return sel.relevance_probability(r) if kind == "calibrated_utility" else sel.soft_output(r)[0].numpy()

    before = soft(r)
    for module in sel.modules:
        module.train()
    np.testing.assert_array_equal(soft(r), before)
    assert not any(module.training for module in sel.modules)


@pytest.mark.parametrize("val", ["none", "empty"])
def test_train_module_without_val_rows_keeps_the_last_epoch(task, val):
    """No val rows: no best epoch to restore, no early stop; the last epoch's state stays."""
    train = GateSelector.from_config(FAST).arrays(rank_slates(*task["train"]), targets=True, fit_scaler=True)
    module = GateModule(train["x"].shape[-1])
    states = []
    module.on_train_epoch_end = lambda: states.append(copy.deepcopy(module.state_dict()))
    no_rows = {k: v[:0] for k, v in train.items()}
    history = train_module(module, train, None if val == "none" else no_rows, max_epochs=3)
    assert history == {"epochs_run": 3.0} and len(states) == 3
    final = module.state_dict()
    assert all(torch.equal(final[k], states[-1][k]) for k in final)
    assert not all(torch.equal(final[k], states[0][k]) for k in final)  # it trained: a restore would show

# ---- saving --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,hp", [
    ("gate", dict(hidden=8, n_seeds=2)), ("kclassifier", dict(arch="mlp", hidden=8)),
    ("expected_utility", dict(hidden=8, n_seeds=2)), ("fixed_k", {}),
    ("score_threshold", {}), ("relative_threshold", dict(normalize=None)), ("cumulative_utility", dict(n_grid=8)),
    ("oracle", {}),
])
def test_save_and_load_round_trip(task, tmp_path, kind, hp):
    s, sl = task["train"]
    s_va, sl_va = task["val"]
    extra = dict(FAST, max_epochs=5) if kind in ("gate", "kclassifier", "expected_utility") else {}
    sel, metrics = fit_selector(kind, s, sl, s_va, sl_va, output_dir=tmp_path / "run", **extra, **hp)
    loaded = load_selector(tmp_path / "run" / "selector")
    r = rank_slates(*task["test"])
    assert type(loaded) is type(sel)
    assert (loaded.select(r) == sel.select(r)).all()
    assert loaded.get_config() == json.loads(json.dumps(sel.get_config()))
    doc = read_selector_config(tmp_path / "run" / "selector")
    assert doc["kind"] == kind and doc["metadata"]["metrics"]["train/mean_k"] == metrics["train/mean_k"]
    assert json.loads((tmp_path / "run" / "metrics.json").read_text()) == pytest.approx(metrics)
    # saving again replaces the directory (no leftovers)
    save_selector(loaded, tmp_path / "run" / "selector")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["metrics.json", "selector"]


def test_load_rejects_foreign_files(tmp_path):
    (tmp_path / "selector.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ValueError):
        load_selector(tmp_path)


def test_fit_selector_errors_and_fit_on(task):
    s, sl = task["train"]
    s_va, sl_va = task["val"]
    with pytest.raises(ValueError):
        fit_selector("nope", s, sl)
    with pytest.raises(ValueError):
        fit_selector("gate", None, None, s_va, sl_va)
    with pytest.raises(ValueError):
        fit_selector("fixed_k", s, sl, fit_on="val")  # no val data, no k
    a, _ = fit_selector("fixed_k", s, sl, s_va, sl_va, fit_on="val")
    assert a.k == FixedK().fit(rank_slates(s_va, sl_va)).k
    b, m = fit_selector("fixed_k", s, sl, s_va, sl_va, k=2)
    assert b.k == 2 and m["train/mean_k"] == 2
    c, _ = fit_selector("score_threshold", s, sl, s_va, sl_va, fit_on="train+val")
    assert c.threshold is not None


def test_extra_features_are_carried_from_the_slates(task):
    (s, sl), (s_va, sl_va) = task["train"], task["val"]
    # the retrieval_score field holds the useful signal here, the "reranker" scores are noise
    rng = np.random.default_rng(5)
    noisy = rng.normal(size=s.shape)
    sl = slates_of(sl.utility, sl.mask, retrieval=s)
    sl_va = slates_of(sl_va.utility, sl_va.mask, retrieval=s_va)
    noisy_va = rng.normal(size=s_va.shape)
    fast = {**FAST, "lr": LR["gate"]}
    with_extra, m1 = fit_selector("gate", noisy, sl, noisy_va, sl_va, extra_features=["retrieval_score"], **fast)
    without, m2 = fit_selector("gate", noisy, sl, noisy_va, sl_va, **fast)
    assert m1["val/udcg"] > m2["val/udcg"]
    # at inference the jobs rank with the fields the selector reads (select_k); without them it refuses
    got = select_k(with_extra, noisy_va, sl_va)
    np.testing.assert_array_equal(got, with_extra.select(rank_slates(noisy_va, sl_va, extra_fields=("retrieval_score",))))
    with pytest.raises(ValueError, match="retrieval_score"):
        with_extra.select(rank_slates(noisy_va, sl_va))


def test_fit_best_selector_keeps_the_best_on_val(task):
    (s, sl), (s_va, sl_va) = task["train"], task["val"]
    best, rows = fit_best_selector([("fixed_k", {}), ("gate", FAST)], s, sl, s_va, sl_va, progress=False)
    assert len(rows) == 2
    assert best.kind == max(rows, key=lambda r: r["val/udcg"])["kind"]


def test_refit_trains_the_chosen_configuration_on_train_and_val_for_the_epochs_val_chose(task):
    (s, sl), (s_va, sl_va) = task["train"], task["val"]
    sel, metrics = fit_selector("kclassifier", s, sl, s_va, sl_va, **{**FAST, "max_epochs": 6, "patience": 2})
    new = refit_selector(sel, (s, sl), (s_va, sl_va))
    assert new.training.patience is None and new.training.max_epochs == int(sel.history["best_epoch"]) + 1
    assert new.history["epochs_run"] == new.training.max_epochs  # nothing held out: no early stop
    both = [rank_slates(s, sl), rank_slates(s_va, sl_va)]  # standardised on the train + val rows
    x = np.concatenate([passage_features(r, new.features, temperature=new.temperature)[r.mask] for r in both])
    np.testing.assert_allclose(new.scaler.mean, x.mean(0), rtol=1e-6, atol=1e-9)
    assert not np.allclose(sel.scaler.mean, new.scaler.mean)
    assert new.fits_on_val and new.crossfit_metrics == {k: v for k, v in metrics.items() if k.startswith("val/")}
    fixed = fit_selector("fixed_k", s, sl, s_va, sl_va)[0]
    assert refit_selector(fixed, (s, sl), (s_va, sl_va)) is fixed  # rules, and what already saw val, stay
    assert refit_selector(new, (s, sl), (s_va, sl_va)) is new


def test_group_kfold_keeps_groups_together():
    groups = [f"a{i % 7}" for i in range(50)]
    folds = group_kfold(groups, 3, seed=1)
    assert sorted(np.concatenate(folds).tolist()) == list(range(50))
    for f in folds:
        other = set(np.setdiff1d(np.arange(50), f))
        assert not {groups[i] for i in f} & {groups[i] for i in other}
    sizes = [len(f) for f in folds]
    assert max(sizes) - min(sizes) <= 8
    with pytest.raises(ValueError):
        group_kfold(["x", "y"], 3)


def test_prefix_table_targets_in_arrays(task):
    s, sl = task["train"]
    sel = GateSelector.from_config(FAST)
    r = rank_slates(s, sl)
    arr = sel.arrays(r, targets=True, fit_scaler=True)
    np.testing.assert_allclose(arr["table"], prefix_udcg(r.utility, r.mask), rtol=1e-6)
    assert (arr["oracle_k"] == oracle_k(r.utility, r.mask)).all()
    assert KClassifierSelector().kind == "kclassifier"
