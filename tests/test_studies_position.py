"""Positional bias (Figure 1) with the fake LLM: the lists, exact accuracy by position, metric curves, weights."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from test_studies_common import LLM, FakeScorer, annotate, make_record, outcome_of

from udcg_ltr.fit.weights import UDCGThetaWeights, save_weights
from udcg_ltr.stats.paired import cochran_q
from udcg_ltr.studies.position import PositionConfig, plan_query, predicted_curves, run_positional_bias


def world(n=24, seed=0):
    rng = np.random.default_rng(seed)
    recs = []
    for i in range(n):
        strengths = list(np.round(rng.random(int(rng.integers(4, 8))), 3))
        pos = int(rng.integers(0, len(strengths) + 1))
        recs.append(make_record(i, strengths[:pos] + ["R"] + strengths[pos:], split="test" if i % 2 else "val"))
    recs.append(make_record(n, [0.2, 0.3, 0.9]))  # no relevant passage
    recs.append(make_record(n + 1, ["R", 0.2]))  # too few irrelevant passages for k = 4
    annotate(recs)
    return recs


def test_lists_move_only_the_relevant_passage():
    rec = make_record(0, [0.9, "R", 0.1, 0.7, 0.3, 0.6])
    annotate([rec])
    plan = plan_query(rec, LLM, PositionConfig(k=4))
    assert plan.relevant_pid == "q0-p1"
    assert plan.distractors == ("q0-p0", "q0-p2", "q0-p3")  # best-ranked irrelevant, retrieval order
    lists = [plan.context(i) for i in range(1, 5)]
    assert lists[0] == ("q0-p1", "q0-p0", "q0-p2", "q0-p3")
    assert lists[3] == ("q0-p0", "q0-p2", "q0-p3", "q0-p1")
    for i, ctx in enumerate(lists):
        assert ctx.index("q0-p1") == i
        assert tuple(p for p in ctx if p != "q0-p1") == plan.distractors
    hard = plan_query(rec, LLM, PositionConfig(k=4, distractors="hard"))
    assert hard.distractors == ("q0-p0", "q0-p3", "q0-p5")
    weak = plan_query(rec, LLM, PositionConfig(k=4, distractors="weak"))
    assert set(weak.distractors) == {"q0-p2", "q0-p4", "q0-p5"}


def test_predicted_curves_follow_the_metric_definitions():
    k = 5
    c = predicted_curves(k)
    i = np.arange(1, k + 1)
    np.testing.assert_allclose(c["ndcg"], 1 / np.log2(i + 1))
    np.testing.assert_allclose(c["mrr"], 1 / i)
    np.testing.assert_allclose(c["map"], 1 / i)
    np.testing.assert_allclose(c["precision"], np.full(k, 1 / k))


def test_accuracy_by_position_is_exact(tmp_path):
    recs = world()
    by_qid = {r.qid: r for r in recs}
    w = UDCGThetaWeights(k=4, alpha=[0.9, 0.4, 0.3, 0.8], beta=[0.1, 0.1, 0.1, 0.1])  # equal beta: order = alpha
    wpath = save_weights(tmp_path / "w.json", [UDCGThetaWeights.udcg_equivalent(3), w])
    rep = run_positional_bias(recs, FakeScorer(), llm=LLM, out_dir=tmp_path / "out", k=4, weights=wpath,
                              n_bootstrap=300, cache=None, progress=False)
    assert rep.n_queries == len(recs) - 2
    assert rep.meta["selection"]["excluded"] == {"no relevant passage": 1, "fewer than k-1=3 irrelevant passages": 1}
    per_query = list(csv.DictReader(open(rep.paths["per_query_csv"])))
    correct = np.zeros((rep.n_queries, 4))
    for qi, row in enumerate(per_query):
        plan = plan_query(by_qid[row["qid"]], LLM, PositionConfig(k=4))
        for j in range(4):
            outcome = outcome_of(by_qid[row["qid"]], plan.context(j + 1))
            assert row[f"outcome_pos{j + 1}"] == outcome
            correct[qi, j] = outcome == "correct"
            # the fake answers the first decisive passage: correct iff no hard distractor precedes the relevant one
            strengths = [1 - by_qid[row["qid"]].passage(p).annotations[LLM]["p_no_response"]
                         for p in plan.distractors[:j]]
            assert correct[qi, j] == float(all(s <= 0.5 for s in strengths))
    for j, r in enumerate(rep.rows):
        assert r["position"] == j + 1
        assert r["correct"] == pytest.approx(correct[:, j].mean())
        assert r["correct_lo"] <= r["correct"] <= r["correct_hi"]
        assert r["alpha"] == pytest.approx(w.alpha[j]) and r["beta"] == pytest.approx(w.beta[j])
        assert r["ndcg"] == pytest.approx(1 / np.log2(j + 2)) and r["precision"] == pytest.approx(0.25)
    accs = [r["correct"] for r in rep.rows]
    assert accs == sorted(accs, reverse=True) and accs[0] == 1.0  # first-decisive reader: monotone
    assert rep.meta["tests"]["cochran_q"]["Q"] == pytest.approx(cochran_q(correct)["Q"])
    fl = rep.meta["tests"]["first_minus_last"]
    assert fl["diff"] == pytest.approx(correct[:, 0].mean() - correct[:, 3].mean())
    middle = correct[:, 1:3].mean(1)
    assert rep.meta["tests"]["first_minus_middle"]["diff"] == pytest.approx((correct[:, 0] - middle).mean())
    assert rep.meta["tests"]["last_minus_middle"]["diff"] == pytest.approx((correct[:, 3] - middle).mean())
    assert "U shape (both CIs above 0): no" in rep.markdown  # the fake reader is monotone, not U-shaped
    # UDCG has no positional discount: flat; UDCG_theta follows alpha
    udcg_vals = [r["udcg"] for r in rep.rows]
    assert max(udcg_vals) - min(udcg_vals) < 1e-12
    theta = [r["udcg_theta"] for r in rep.rows]
    assert list(np.argsort(theta)) == [2, 1, 3, 0]
    assert rep.paths["png"].read_bytes()[:4] == b"\x89PNG"
    assert "alpha_i" in rep.paths["table_md"].read_text()


def test_weights_objects_and_no_matching_fit(tmp_path):
    recs = world(8)
    w = UDCGThetaWeights(k=3, alpha=[1.0, 0.5, 0.8], beta=[0.1, 0.1, 0.1])
    rep = run_positional_bias(recs, FakeScorer(), llm=LLM, out_dir=tmp_path / "a", k=3, weights=w, n_bootstrap=50,
                              cache=None, progress=False)
    assert [r["alpha"] for r in rep.rows] == pytest.approx([1.0, 0.5, 0.8])
    none = run_positional_bias(recs, FakeScorer(), llm=LLM, out_dir=tmp_path / "b", k=4, weights=[w], n_bootstrap=50,
                               cache=None, progress=False)
    assert "alpha" not in none.rows[0] and "udcg_theta" not in none.rows[0]
    assert "none given" in none.markdown


def test_splits_and_cap(tmp_path):
    recs = world()
    rep = run_positional_bias(recs, FakeScorer(), llm=LLM, out_dir=tmp_path, k=3, splits=["test"], max_queries=5,
                              n_bootstrap=50, cache=None, progress=False)
    assert rep.n_queries == 5 and rep.meta["selection"]["by_split"] == {"test": 5}
    assert len(rep.runs) == 15


def test_bad_parameters():
    with pytest.raises(ValueError):
        PositionConfig(distractors="closest")
    with pytest.raises(ValueError):
        PositionConfig(k=1)
