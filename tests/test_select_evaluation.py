"""Selector evaluation: the per-selector table, k histograms, end to end with a fake LLM, the dynamic-k report."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from udcg_ltr import metrics as M
from udcg_ltr.annotate.end_to_end import end_to_end_selection
from udcg_ltr.annotate.scorer import ScoreResult
from udcg_ltr.data.padded import pad_records
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.metrics.distractor import best_k
from udcg_ltr.report import write_csv
from udcg_ltr.select import (
    EndToEnd,
    FixedK,
    OracleK,
    RelativeThreshold,
    dynamic_k_report,
    evaluate_selectors,
    format_rows_markdown,
    rank_slates,
)
from udcg_ltr.select.evaluation import kept_pids

LLM = "fake-llm"


def make_records(n=12, w=4, seed=0):
    """Each question's answer is ``zq{i}``; relevant passages contain it, others do not."""
    rng = np.random.default_rng(seed)
    records, scores = [], []
    for i in range(n):
        passages = []
        rel = rng.random(w) < 0.35
        for j in range(w):
            text = f"the reply is zq{i} here" if rel[j] else f"nothing useful number {j}"
            passages.append(Passage(pid=f"q{i}-p{j}", title=f"T{i}", text=text, rank=j + 1, score=float(w - j),
                                    relevance=int(rel[j]),
                                    annotations={LLM: {"p_no_response": float(rng.uniform(0.05, 0.9))}}))
        records.append(QueryRecord(qid=f"q{i}", question=f"question {i}?", answers=[f"zq{i}"], passages=passages))
        scores.append(rng.normal(size=w) + 2.0 * rel)
    return records, np.array(scores)


class FakeScorer:
    """Answers with the answer token of the *first* passage when it has one, else with a fixed wrong word."""

    def __init__(self, abstain_on_empty_text=False):
        self.calls = []

    def score(self, items, *, generate=False):
        assert generate
        self.calls.append(len(items))
        out = []
        for it in items:
            first = it.passages[0][1].split()
            answer = next((w for w in first if w.startswith("zq")), "banana")
            tokens = sum(len(t.split()) + len(x.split()) for t, x in it.passages) + len(it.question.split())
            out.append(ScoreResult(p_no_response=0.1, answer=answer, n_prompt_tokens=tokens))
        return out


def test_evaluate_selectors_rows_match_direct_computation(tmp_path):
    records, scores = make_records()
    slates = pad_records(records, llm=LLM)
    r = rank_slates(scores, slates)
    sels = {"fixed_1": FixedK(1), "fixed_3": FixedK(3), "relative": RelativeThreshold(0.5), "oracle": OracleK()}
    ks = {}
    rows = evaluate_selectors(sels, scores, slates, plot_path=tmp_path / "k.png", ks=ks, title="t")
    assert [row["selector"] for row in rows] == list(sels)
    for row in rows:
        k = ks[row["selector"]]
        expect = M.udcg(r.utility, r.mask & (np.cumsum(r.mask, 1) <= k[:, None])).mean()
        assert row["udcg"] == pytest.approx(expect)
        assert sum(int(c) for c in row["k_hist"].split()) == len(records)
        assert row["mean_k"] == pytest.approx(k.mean())
    oracle_row = rows[-1]
    assert all(oracle_row["udcg"] >= row["udcg"] - 1e-12 for row in rows)
    assert oracle_row["uses_labels"] and not rows[0]["uses_labels"]
    assert (tmp_path / "k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_kept_pids_follow_the_ranking():
    records, scores = make_records(n=3)
    slates = pad_records(records, llm=LLM)
    r = rank_slates(scores, slates)
    got = kept_pids(r, slates.pids, [0, 2, 4])
    assert got[0] == []
    order = np.argsort(-scores[1], kind="stable")[:2]
    assert got[1] == [records[1].passages[j].pid for j in order]
    assert len(got[2]) == 4


def test_end_to_end_with_fake_scorer_grades_and_counts():
    records, scores = make_records(n=10)
    slates = pad_records(records, llm=LLM)
    r = rank_slates(scores, slates)
    k = np.array([0, 1, 2, 0, 1, 1, 3, 0, 2, 4])
    contexts = kept_pids(r, slates.pids, k)
    scorer = FakeScorer()
    res = end_to_end_selection(records, contexts, scorer, return_outcomes=True)
    assert scorer.calls == [int((k > 0).sum())]  # empty contexts are never sent
    outcomes = res["outcomes"]
    for i, ctx in enumerate(contexts):
        if not ctx:
            assert outcomes[i] == "abstained"
        else:
            first_relevant = records[i].passage(ctx[0]).relevance == 1
            assert outcomes[i] == ("correct" if first_relevant else "wrong")
    n = len(records)
    assert res["abstained_rate"] == pytest.approx(outcomes.count("abstained") / n)
    assert res["correct_rate"] + res["abstained_rate"] + res["wrong_rate"] == pytest.approx(1.0)
    assert res["mean_passages"] == pytest.approx(k.mean())
    words = [sum(len(f"{records[i].passage(p).title} {records[i].passage(p).text}".split()) for p in c)
             for i, c in enumerate(contexts)]
    assert res["mean_context_tokens"] == pytest.approx(np.mean(words)) and res["context_token_unit"] == "words"
    assert res["mean_prompt_tokens"] > res["mean_context_tokens"]  # prompt = context + question
    # all-empty selection: nothing sent, everything abstained
    empty = end_to_end_selection(records, [[] for _ in records], FakeScorer())
    assert empty["abstained_rate"] == 1.0 and empty["mean_prompt_tokens"] == 0.0


def test_end_to_end_counts_tokens_with_a_tokenizer():
    records, _ = make_records(n=2)

    class CharTok:
        def encode(self, text, add_special_tokens=False):
            return list(text)

    contexts = [[records[0].passages[0].pid], []]
    res = end_to_end_selection(records, contexts, FakeScorer(), tokenizer=CharTok())
    p = records[0].passages[0]
    assert res["mean_context_tokens"] == pytest.approx(len(f"{p.title} {p.text}") / 2)
    assert res["context_token_unit"] == "tokens"
    with pytest.raises(ValueError):
        end_to_end_selection(records, contexts[:1], FakeScorer())


def test_evaluate_selectors_end_to_end_columns(tmp_path):
    records, scores = make_records(n=8)
    slates = pad_records(records, llm=LLM)
    rows = evaluate_selectors({"one": FixedK(1), "none": FixedK(0)}, scores, slates,
                              end_to_end=EndToEnd(records, FakeScorer()))
    assert rows[1]["abstained_rate"] == 1.0 and rows[1]["mean_passages"] == 0.0
    assert {"correct_rate", "wrong_rate", "mean_prompt_tokens"} <= set(rows[0])
    md = format_rows_markdown(rows)
    assert md.splitlines()[0].startswith("| selector | split | n | udcg")
    assert len(md.splitlines()) == 2 + len(rows)
    path = write_csv(tmp_path / "rows.csv", rows)
    with open(path) as f:
        back = list(csv.DictReader(f))
    assert [b["selector"] for b in back] == ["one", "none"]
    assert float(back[0]["udcg"]) == pytest.approx(rows[0]["udcg"])
    with pytest.raises(ValueError, match="records=None"):
        EndToEnd(None, FakeScorer())  # no records
    with pytest.raises(ValueError, match="8 records but 7"):
        evaluate_selectors({"one": FixedK(1)}, scores[:7], pad_records(records[:7], llm=LLM),
                           end_to_end=EndToEnd(records, FakeScorer()))


def test_dynamic_k_report_matches_the_metric_module(tmp_path):
    records, scores = make_records(n=15, w=5, seed=3)
    slates = pad_records(records, llm=LLM)
    rows = dynamic_k_report({"retriever": (slates.retrieval_score, slates), "reranker": (scores, slates)})
    assert [(r["ranking"], r["utilities"]) for r in rows] == [
        ("retriever", "heuristic"), ("retriever", "llm"), ("reranker", "heuristic"), ("reranker", "llm")]
    r = rank_slates(scores, slates)
    bk, _ = best_k(r.utility, r.mask, discount=None, min_k=1)
    llm_row = rows[3]
    assert llm_row["best_k_mean"] == pytest.approx(bk.mean())
    assert llm_row["safe"] + llm_row["risky"] + llm_row["dangerous"] == pytest.approx(1.0)
    assert 0.0 <= llm_row["distractor_rate"] <= 1.0
    # the heuristic source counts relevant passages as +1: the reranker (scores favour relevant
    # passages) has a lower distractor rate than a ranking that puts them last
    worst = dynamic_k_report({"worst": (-scores, slates)}, sources=("heuristic",))[0]
    assert rows[2]["distractor_rate"] < worst["distractor_rate"]
    write_csv(tmp_path / "dk.csv", rows)
    assert "| retriever | heuristic |" in format_rows_markdown(rows)
