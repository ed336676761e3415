"""Retriever fusion (udcg_ltr.models.fusion): interpolation, the weight chosen on held-out questions, and the
weight saved with a reranker and applied by Reranker.score_records."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from job_fixtures import LLM as JOB_LLM
from job_fixtures import run_train_job, tiny_job_config, tiny_records
from model_fixtures import tiny_bert

from udcg_ltr.data.schema import DataError, Passage, QueryRecord
from udcg_ltr.models.evaluation import per_query_udcg
from udcg_ltr.models.fusion import fit_fusion_weight, fuse_scores, retriever_prior, standardise

LLM = "toy-llm"


def record(qid, utilities, ranks, scores=None):
    """One question whose passages have the given utilities (relevant iff positive) and retriever ranks/scores."""
    ps = [Passage(pid=f"{qid}_{i}", text=f"passage {i}", rank=r, score=None if scores is None else scores[i],
                  relevance=int(u > 0), annotations={LLM: {"p_no_response": 1.0 - abs(u)}})
          for i, (u, r) in enumerate(zip(utilities, ranks))]
    return QueryRecord(qid=qid, question=f"question {qid}", answers=["x"], passages=ps)


def test_prior_is_the_score_else_minus_log_rank_else_none():
    assert retriever_prior(record("a", [0.5, -0.5], [1, 2], scores=[0.9, 0.1])).tolist() == [0.9, 0.1]
    assert retriever_prior(record("b", [0.5, -0.5], [1, 4])) == pytest.approx([0.0, -np.log(4)])
    assert retriever_prior(record("c", [0.5, -0.5], [1, None])) is None


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=2, max_size=8), st.integers(0, 2 ** 31))
def test_weight_zero_is_the_reranker_and_a_large_weight_the_retriever_order(scores, seed):
    n = len(scores)
    ranks = (np.random.default_rng(seed).permutation(n) + 1).tolist()
    rec = record("q", [0.1] * n, ranks)
    assert fuse_scores([rec], [np.array(scores)], 0.0)["q"].tolist() == scores
    fused = fuse_scores([rec], [np.array(scores)], 1e9)["q"]
    assert np.argsort(-fused, kind="stable").tolist() == np.argsort(ranks, kind="stable").tolist()


def test_standardise_and_bad_weights():
    assert standardise(np.array([2.0, 2.0])).tolist() == [0.0, 0.0]
    z = standardise(np.array([1.0, 2.0, 6.0]))
    assert z.mean() == pytest.approx(0.0) and z.std() == pytest.approx(1.0)
    rec = record("q", [0.5, -0.5], [1, 2])
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="fusion weight"):
            fuse_scores([rec], [np.zeros(2)], bad)


def test_the_chosen_weight_is_the_best_on_the_given_questions():
    # The reranker puts a harmful distractor (-0.9) into the top 2 of every question; the retriever ranks the
    # harmless passage (-0.1) second. Fusion repairs it: a positive weight must win, and the curve must say so.
    recs = [record(f"q{i}", [0.9, -0.9, -0.1], [1, 3, 2]) for i in range(4)]
    reranker = [np.array([2.0, 1.0, 0.0]) for _ in recs]
    w, curve = fit_fusion_weight(recs, reranker, LLM, k=2, weights=(0.0, 0.5, 4.0))
    assert w > 0 and curve[w] > curve[0.0]
    assert curve[w] == pytest.approx(np.mean(per_query_udcg(recs, fuse_scores(recs, reranker, w), LLM, 2)))
    # A reranker that is already right: the tie goes to the reranker alone.
    good = [np.array([2.0, 0.0, 1.0]) for _ in recs]
    assert fit_fusion_weight(recs, good, LLM, k=2, weights=(0.0, 0.5, 4.0))[0] == 0.0
    with pytest.raises(ValueError, match="at least one record"):
        fit_fusion_weight([], [], LLM)


def test_a_saved_weight_is_applied_by_score_records(tmp_path):
    from udcg_ltr.models.reranker import RERANKER_CONFIG, Reranker, save_reranker, save_retriever_fusion

    model, tok = tiny_bert(layers=1, seed=2)
    path = tmp_path / "model"
    save_reranker(model, tok, path, max_length=32)
    recs = [record(f"q{i}", [0.9, -0.9, -0.1, 0.2], [2, 1, 4, 3], scores=[0.3, 0.8, 0.1, 0.2]) for i in range(3)]
    raw = Reranker.from_pretrained(path).score_records(recs)
    save_retriever_fusion(path, 1.5)
    assert json.loads((path / RERANKER_CONFIG).read_text())["max_length"] == 32  # the rest of the side file kept
    fused_rr = Reranker.from_pretrained(path)
    assert fused_rr.retriever_fusion == 1.5
    expected = fuse_scores(recs, raw, 1.5)
    for got, want in zip(fused_rr.score_records(recs).aligned(recs), expected.aligned(recs)):
        assert got == pytest.approx(want, abs=1e-5)
    for got, want in zip(fused_rr.score_records(recs, fuse=False).aligned(recs), raw.aligned(recs)):
        assert got == pytest.approx(want, abs=1e-5)
    # predict() stays the cross-encoder's own logit (sentence-transformers' contract)
    assert fused_rr.predict([(recs[0].question, recs[0].passages[0].text)])[0] == pytest.approx(raw["q0"][0], abs=1e-5)


def test_a_bad_saved_weight_names_the_file_and_field(tmp_path):
    from udcg_ltr.models.reranker import RERANKER_CONFIG, Reranker, save_reranker

    model, tok = tiny_bert(layers=1, seed=2)
    path = tmp_path / "model"
    save_reranker(model, tok, path, max_length=32, extra={"retriever_fusion": -2})
    with pytest.raises(DataError) as err:
        Reranker.from_pretrained(path)
    assert RERANKER_CONFIG in str(err.value) and "retriever_fusion" in str(err.value)


def test_the_train_job_chooses_the_weight_on_val_and_saves_it(tmp_path, monkeypatch):
    from udcg_ltr.models.reranker import Reranker, read_reranker_config

    records = tiny_records({"train": 6, "val": 4, "test": 3}, seed=3)
    cfg = tiny_job_config(tmp_path, monkeypatch, records, [
        "loss=udcg_direct", "model.cross_encoder.batch_size=3", "model.cross_encoder.retriever_fusion=true",
        "trainer=debug", "trainer.precision=32-true", "trainer.num_threads=1", "logger=none", "k=3"])
    metrics = run_train_job(cfg)
    weight = metrics["cross_encoder/retriever_fusion"]
    saved = tmp_path / "run" / "cross_encoder" / "model"
    assert read_reranker_config(saved)["retriever_fusion"] == weight
    # the same choice, recomputed from the saved cross-encoder's own scores on the val questions
    val = [r for r in records if r.split == "val"]
    raw = Reranker.from_pretrained(saved, retriever_fusion=0.0).score_records(val)
    assert fit_fusion_weight(val, raw, JOB_LLM, k=3)[0] == weight
