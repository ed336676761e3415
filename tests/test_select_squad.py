"""Dynamic-k selectors on the shared annotated SQuAD set (retriever scores; skipped when the data is absent)."""

from __future__ import annotations

import numpy as np
import pytest

from udcg_ltr import metrics as M
from udcg_ltr.data.padded import pad_records
from udcg_ltr.data.readers.annotated import ANNOTATED_LLM
from udcg_ltr.select import dynamic_k_report, evaluate_selectors, fit_selector, group_kfold, rank_slates


@pytest.fixture(scope="module")
def squad(annotated_squad):
    split = {s: [r for r in annotated_squad if r.split == s] for s in ("train", "val", "test")}
    slates = {s: pad_records(v, llm=ANNOTATED_LLM) for s, v in split.items()}
    return split, slates


def test_baselines_and_oracle_on_real_data(squad):
    split, slates = squad
    sc = {s: v.retrieval_score for s, v in slates.items()}
    sels = {}
    for kind, hp in (("fixed_k", {}), ("score_threshold", {}), ("relative_threshold", {"normalize": None}),
                     ("cumulative_utility", {"n_grid": 10}), ("oracle", {})):
        sels[kind], m = fit_selector(kind, sc["train"], slates["train"], sc["val"], slates["val"], fit_on="val", **hp)
    val = rank_slates(sc["val"], slates["val"])
    curve = [M.udcg(val.utility, val.mask, k=k).mean() for k in range(11)]
    assert sels["fixed_k"].k == int(np.argmax(curve))  # best fixed k is chosen on val
    rows = {r["selector"]: r for r in evaluate_selectors(sels, sc["test"], slates["test"])}
    assert all(rows["oracle"]["udcg"] >= r["udcg"] for r in rows.values())
    assert rows["oracle"]["udcg"] > rows["fixed_k"]["udcg"]  # there is something to gain from choosing k
    assert rows["oracle"]["k0_rate"] > 0  # some questions are better off with no passage


def test_dynamic_k_report_and_folds_on_real_data(squad):
    split, slates = squad
    rows = dynamic_k_report({"retriever": (slates["test"].retrieval_score, slates["test"])})
    assert len(rows) == 2 and all(1 <= r["best_k_mean"] <= 10 for r in rows)
    folds = group_kfold([r.extra["article"] for r in split["train"]], 2)
    arts = [{split["train"][i].extra["article"] for i in f} for f in folds]
    assert not arts[0] & arts[1]


def test_reader_probes_carry_relevance_signal_on_real_data(squad):
    """The LLM's own single-passage behaviour (no labels read) separates answer-bearing passages."""
    _, slates = squad
    sl = slates["train"]
    rel, m = sl.relevant, sl.mask
    quoted = sl.probes["probe_answer_in_passage"] > 0
    assert rel[m & quoted].mean() > rel[m & ~quoted].mean() + 0.2
    assert sl.p_no_response[m & rel].mean() < sl.p_no_response[m & ~rel].mean() - 0.1


def test_expected_utility_selector_is_calibrated_on_real_data(squad):
    """Its relevance probabilities match the answer-bearing rate of held-out top passages (what the decision needs)."""
    import torch

    from udcg_ltr.select.nn import as_tensors

    _, slates = squad
    sc = {s: v.retrieval_score for s, v in slates.items()}
    probes = ["p_no_response", "probe_abstains", "probe_answer_in_passage", "probe_agreement"]
    sel, metrics = fit_selector("expected_utility", sc["train"], slates["train"], sc["val"], slates["val"],
                                extra_features=probes, lr=0.03, max_epochs=60, patience=20)
    test = rank_slates(sc["test"], slates["test"], extra_fields=tuple(probes))
    with torch.no_grad():
        logit, magnitude = sel.module.predictions(as_tensors(sel.arrays(test))["x"])
    pi_top = torch.sigmoid(logit[:, 0]).numpy()
    assert abs(pi_top.mean() - (test.utility[:, 0] > 0).mean()) < 0.1
    assert np.abs(magnitude.numpy()[test.mask] - np.abs(test.utility[test.mask])).mean() < 0.05  # |u| = 1 - P(NR)
    assert metrics["val/udcg"] >= 0.5
