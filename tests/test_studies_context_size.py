"""Context-size sensitivity (Figure 2): the wrapper reproduces the correlation study's k sweep, in both modes."""

from __future__ import annotations

import numpy as np
import pytest
from test_studies_common import LLM, FakeScorer, annotate, make_record

from udcg_ltr.annotate.cache import AnnotationCache
from udcg_ltr.annotate.end_to_end import run_contexts
from udcg_ltr.fit.sampling import ContextSamplingConfig, sample_contexts
from udcg_ltr.io import json_safe
from udcg_ltr.studies.context_size import ContextSizeConfig, run_context_size
from udcg_ltr.studies.correlation import StudySpec, SweepSpec, run_correlation_study

METRICS = ("udcg", "udcg_theta", "ndcg", "map", "precision", "hits", "erag")


def world(n=36, seed=0):
    rng = np.random.default_rng(seed)
    recs = []
    for i in range(n):
        pool = list(np.round(rng.random(int(rng.integers(5, 9))), 3))
        for _ in range(int(rng.integers(1, 3))):
            pool.insert(int(rng.integers(0, len(pool) + 1)), "R")
        recs.append(make_record(i, pool, split=["train", "val", "test"][i % 3]))
    annotate(recs)
    return recs


def test_truncate_mode_matches_the_correlation_study(tmp_path):
    recs = world()
    ctxs = sample_contexts(recs, ContextSamplingConfig(n_contexts=6, k=4, seed=1))
    runs = run_contexts(recs, ctxs, FakeScorer(), progress=False)
    rep = run_context_size(recs, runs, llm=LLM, out_dir=tmp_path / "cs", metrics=METRICS, k_values=range(1, 7),
                           n_bootstrap=200, progress=False)
    assert rep.meta["mode"] == "truncate" and rep.meta["outcome_source"] == "full_context"
    assert rep.meta["k_values"] == [1, 2, 3, 4]
    assert rep.meta["selection"]["k_dropped_longer_than_runs"] == [5, 6]
    ref = run_correlation_study(recs, runs, llm=LLM, k=4, sweep=SweepSpec([1, 2, 3, 4], "truncate"),
                                spec=StudySpec(metrics=list(METRICS), n_bootstrap=200, theta_variants=["full"]),
                                out_dir=tmp_path / "ref", progress=False)
    # the study's own sweep keeps only its SWEEP_METRICS; the wrapper keeps any metric (MAP, HITS here)
    names = [r["metric"] for r in rep.rows]
    assert names == [m for m in METRICS]
    for r in ref.k_sweep:
        mine = next(x for x in rep.rows if x["metric"] == r["metric"])
        assert mine[f"k={r['k']}"] == pytest.approx(r["spearman"], nan_ok=True)
    n_test = sum(1 for r in recs if r.split == "test")
    assert rep.n_queries == n_test
    assert all(v <= n_test for v in rep.meta["queries_by_k"].values())
    assert rep.paths["png"].read_bytes()[:4] == b"\x89PNG"
    md = rep.paths["table_md"].read_text()
    assert "| MAP |" in md and "k=4" in md and "full_context" in rep.markdown


def test_resample_mode_answers_every_k_through_the_cache(tmp_path):
    recs = world(24, seed=2)
    cache = AnnotationCache(tmp_path / "cache")
    fake = FakeScorer()
    params = dict(k_values=(1, 2, 3), n_contexts=4, metrics=("udcg", "ndcg", "precision"), n_bootstrap=100)
    rep = run_context_size(recs, fake, llm=LLM, out_dir=tmp_path / "a", cache=cache, progress=False, **params)
    assert rep.meta["mode"] == "resample" and rep.meta["outcome_source"] == "llm"
    expected = sum(len({(c.qid, c.pids) for c in sample_contexts(recs, ContextSamplingConfig(n_contexts=4, k=k))})
                   for k in (1, 2, 3))
    assert fake.n_scored == expected  # each distinct prompt once (repeats within a k come from the dedupe)
    first = fake.n_scored
    again = run_context_size(recs, fake, llm=LLM, out_dir=tmp_path / "b", cache=cache, progress=False, **params)
    assert fake.n_scored == first  # everything from the cache
    assert json_safe(again.rows) == json_safe(rep.rows)  # NaN-aware
    # at k = 1 Precision and nDCG agree on every context (both are the relevance of the single passage)
    row = {r["metric"]: r for r in rep.rows}
    assert row["precision"]["k=1"] == pytest.approx(row["ndcg"]["k=1"])


def test_parameters():
    with pytest.raises(ValueError, match="unknown metrics"):
        ContextSizeConfig(metrics=("udcg", "BLEU"))
    with pytest.raises(ValueError):
        ContextSizeConfig(mode="shuffle")
    recs = world(9)
    with pytest.raises(ValueError, match="needs an LLM"):
        run_context_size(recs, [], llm=LLM, out_dir="/tmp/unused", mode="resample")
