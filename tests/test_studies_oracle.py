"""Oracle contexts by annotation schema (Table 2) with the fake LLM: the orders, exact rates and paired tests."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from scipy.stats import binomtest
from test_studies_common import LLM, FakeScorer, annotate, make_record, outcome_of

from udcg_ltr.annotate.cache import AnnotationCache
from udcg_ltr.io import json_safe
from udcg_ltr.studies.oracle import OracleConfig, oracle_order, plan_oracle_contexts, run_oracle_contexts


def test_schema_orders():
    # retrieval order: hard distractor, hidden relevant, weak distractor, usable relevant, medium distractor
    rec = make_record(0, [0.9, "H", 0.1, "R", 0.6])
    annotate([rec])
    pids = lambda ps: [p.pid for p in ps]  # noqa: E731
    # binary relevance first, ties by retrieval order
    assert pids(oracle_order(rec, "relevance", LLM)) == ["q0-p1", "q0-p3", "q0-p0", "q0-p2", "q0-p4"]
    # eRAG: only the usable relevant passage answers correctly alone
    assert pids(oracle_order(rec, "erag", LLM)) == ["q0-p3", "q0-p0", "q0-p1", "q0-p2", "q0-p4"]
    # utility: 0.95 (usable) > 0.1 (hidden) > -0.1 > -0.6 > -0.9
    assert pids(oracle_order(rec, "utility", LLM)) == ["q0-p3", "q0-p1", "q0-p2", "q0-p4", "q0-p0"]
    ctxs = plan_oracle_contexts([rec], LLM, OracleConfig(ks=(2, 3)))
    assert [(c.kind, c.pids) for c in ctxs] == [
        ("relevance@2", ("q0-p1", "q0-p3")), ("erag@2", ("q0-p3", "q0-p0")), ("utility@2", ("q0-p3", "q0-p1")),
        ("relevance@3", ("q0-p1", "q0-p3", "q0-p0")), ("erag@3", ("q0-p3", "q0-p0", "q0-p1")),
        ("utility@3", ("q0-p3", "q0-p1", "q0-p2"))]
    # a pool smaller than k: the whole pool
    small = make_record(1, ["R", 0.3])
    annotate([small])
    assert [len(c.pids) for c in plan_oracle_contexts([small], LLM, OracleConfig(ks=(5,)))] == [2, 2, 2]


def world(n=40, seed=0):
    rng = np.random.default_rng(seed)
    recs = []
    for i in range(n):
        pool = list(np.round(rng.random(int(rng.integers(4, 9))), 3))
        for kind in rng.choice(["R", "H", "-"], size=int(rng.integers(0, 3))):
            if kind != "-":
                pool.insert(int(rng.integers(0, len(pool) + 1)), str(kind))
        recs.append(make_record(i, pool, split=["test", "val", "train"][i % 3]))
    annotate(recs)
    return recs


def test_rates_and_paired_tests_are_exact(tmp_path):
    recs = world()
    by_qid = {r.qid: r for r in recs}
    rep = run_oracle_contexts(recs, FakeScorer(), llm=LLM, out_dir=tmp_path, ks=(3, 2), n_bootstrap=300, cache=None,
                              progress=False)
    assert rep.n_queries == len(recs)
    per_query = list(csv.DictReader(open(rep.paths["per_query_csv"])))
    outcomes = {}
    for k in (3, 2):
        for s in ("relevance", "erag", "utility"):
            got = [row[f"{s}@{k}_outcome"] for row in per_query]
            want = [outcome_of(by_qid[row["qid"]], row[f"{s}@{k}_pids"].split()) for row in per_query]
            assert got == want
            assert all(len(row[f"{s}@{k}_pids"].split()) == min(k, len(by_qid[row["qid"]].passages))
                       for row in per_query)
            outcomes[(s, k)] = np.array(want)
    has_rel = np.array([row["pool_has_relevant"] == "True" for row in per_query])
    for r in rep.rows:
        o = outcomes[(r["schema"], r["k"])]
        sel = has_rel if r["subset"] == "with relevant" else np.ones(len(o), bool)
        assert r["queries"] == sel.sum()
        for name in ("correct", "abstained", "wrong"):
            assert r[name] == pytest.approx((o[sel] == name).mean())
            assert r[f"{name}_lo"] <= r[name] <= r[f"{name}_hi"]
    pairs = {(p["k"], p["subset"], p["comparison"]): p for p in rep.tables["pairs"]}
    assert set(c for _, _, c in pairs) == {"erag - relevance", "utility - relevance", "utility - erag"}
    p = pairs[(3, "all", "utility - relevance")]
    u, rl = outcomes[("utility", 3)], outcomes[("relevance", 3)]
    only_u = int(((u == "wrong") & (rl != "wrong")).sum())
    only_r = int(((u != "wrong") & (rl == "wrong")).sum())
    assert (p["only_a_wrong"], p["only_b_wrong"]) == (only_u, only_r)
    expected_p = binomtest(only_u, only_u + only_r, 0.5).pvalue if only_u + only_r else 1.0
    assert p["p_mcnemar_wrong"] == pytest.approx(expected_p)
    assert p["d_wrong"] == pytest.approx((u == "wrong").mean() - (rl == "wrong").mean())
    assert p["wrong_ratio"] == pytest.approx((u == "wrong").mean() / (rl == "wrong").mean())
    # the mechanism the paper describes: utility puts usable passages first and weak distractors last,
    # so this first-decisive reader is never wrong more often with utility contexts
    assert (u == "wrong").mean() < (rl == "wrong").mean()
    assert (u == "correct").mean() >= (rl == "correct").mean()
    assert rep.meta["n_distinct_contexts"] <= rep.meta["n_contexts"] == 6 * len(recs)
    for key in ("table_md", "table_csv", "pairs_md", "pairs_csv", "per_query_csv", "png", "report_md", "summary_json"):
        assert rep.paths[key].is_file() and rep.paths[key].stat().st_size > 0


def test_identical_contexts_are_answered_once(tmp_path):
    recs = world(12, seed=3)
    cache = AnnotationCache(tmp_path / "cache")
    fake = FakeScorer()
    rep = run_oracle_contexts(recs, fake, llm=LLM, out_dir=tmp_path / "a", ks=(3,), n_bootstrap=50, cache=cache,
                              progress=False)
    distinct = len({(r.qid, tuple(r.pids)) for r in rep.runs})
    assert fake.n_scored == distinct == rep.meta["n_distinct_contexts"]
    assert sum(rep.meta["identical_contexts"].values()) > 0
    again = run_oracle_contexts(recs, rep.runs, llm=LLM, out_dir=tmp_path / "b", ks=(3,), n_bootstrap=50,
                                progress=False)
    assert json_safe(again.rows) == json_safe(rep.rows)  # NaN-aware


def test_erag_labels_are_computed_when_answers_are_missing(tmp_path):
    recs = world(6, seed=1)
    for r in recs:
        for p in r.passages:
            p.annotations[LLM].pop("answer_alone")
    fake = FakeScorer()
    rep = run_oracle_contexts(recs, fake, llm=LLM, out_dir=tmp_path, ks=(2,), schemas=("erag", "utility"),
                              n_bootstrap=50, cache=None, progress=False)
    assert rep.meta["annotations"]["missing"] == sum(len(r.passages) for r in recs)
    assert {r["schema"] for r in rep.rows} == {"erag", "utility"}


def test_bad_parameters():
    with pytest.raises(ValueError):
        OracleConfig(schemas=("relevance", "magic"))
    with pytest.raises(ValueError):
        OracleConfig(ks=(0,))
    assert OracleConfig(ks=3).ks == (3,)


def test_contexts_are_k_major():
    recs = [make_record(0, ["R", 0.2, 0.9]), make_record(1, [0.4, "R", 0.1])]
    annotate(recs)
    ctxs = plan_oracle_contexts(recs, LLM, OracleConfig(ks=(3, 1), schemas=("relevance", "utility")))
    assert [(c.qid, c.kind) for c in ctxs] == [
        ("q0", "relevance@3"), ("q0", "utility@3"), ("q1", "relevance@3"), ("q1", "utility@3"),
        ("q0", "relevance@1"), ("q0", "utility@1"), ("q1", "relevance@1"), ("q1", "utility@1")]
    assert len({(c.qid, c.context_id) for c in ctxs}) == len(ctxs)
