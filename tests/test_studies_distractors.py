"""Distractor sensitivity (Table 1) with the fake LLM: pairing, adaptive thresholds and exact statistics."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import wilcoxon
from test_studies_common import LLM, FakeScorer, annotate, make_record, outcome_of

from udcg_ltr.annotate.cache import AnnotationCache
from udcg_ltr.data.contexts import read_context_runs
from udcg_ltr.io import json_safe
from udcg_ltr.studies.distractors import DistractorConfig, plan_query, run_distractor_sensitivity
from udcg_ltr.tracking import RunLogger


def world():
    """Hand-made pools (k=3: one relevant passage + 2 distractors per arm)."""
    specs = [
        ["R", 0.10, 0.15, 0.90, 0.95, 0.50],  # both arms fixed
        [0.30, "R", 0.40, 0.90, 0.85, 0.60],  # weak arm adapted (nothing below 0.2)
        ["R", 0.10, 0.05, 0.60, 0.70, 0.50],  # hard arm adapted (nothing above 0.8)
        [0.10, 0.90, 0.20, 0.95],  # no relevant passage
        ["R", 0.10, 0.90, 0.95],  # 3 irrelevant < 2(k-1)
        ["R", 0.12, 0.18, 0.08, 0.85, 0.99, 0.93, 0.3],  # fixed, more candidates than needed
    ]
    recs = [make_record(i, s) for i, s in enumerate(specs)]
    annotate(recs)
    return recs


def test_plans_pair_the_arms_and_adapt_thresholds():
    recs = world()
    cfg = DistractorConfig(k=3, seed=1)
    plans = [plan_query(r, LLM, cfg) for r in recs]
    assert plans[3] == "no relevant passage"
    assert plans[4].startswith("fewer than 2(k-1)")
    p0, p1, p2, p5 = plans[0], plans[1], plans[2], plans[5]
    assert not p0.weak_adapted and not p0.hard_adapted
    assert sorted(p0.weak_de) == pytest.approx([0.10, 0.15]) and sorted(p0.hard_de) == pytest.approx([0.90, 0.95])
    # weak arm adapted: the 2 lowest-DE passages; the effective threshold is the largest DE taken
    assert p1.weak_adapted and not p1.hard_adapted
    assert sorted(p1.weak_de) == pytest.approx([0.30, 0.40]) and p1.weak_threshold_eff == pytest.approx(0.40)
    assert sorted(p1.hard_de) == pytest.approx([0.85, 0.90])
    assert p2.hard_adapted and not p2.weak_adapted
    assert sorted(p2.hard_de) == pytest.approx([0.60, 0.70]) and p2.hard_threshold_eff == pytest.approx(0.60)
    assert all(d < 0.2 for d in p5.weak_de) and all(d > 0.8 for d in p5.hard_de)
    for p in (p0, p1, p2, p5):
        rel = recs[int(p.qid[1:])].passage(p.relevant_pid)
        assert rel.relevance == 1
        assert p.weak[p.position - 1] == p.hard[p.position - 1] == p.relevant_pid
        assert not set(p.weak) & set(p.hard) - {p.relevant_pid}
        assert list(p.weak_de) == sorted(p.weak_de, reverse=True)
    # without adaptation the queries that need it are left out
    strict = DistractorConfig(k=3, adaptive=False)
    assert isinstance(plan_query(recs[1], LLM, strict), str) and isinstance(plan_query(recs[2], LLM, strict), str)
    assert not isinstance(plan_query(recs[0], LLM, strict), str)


def test_distractors_share_slots_in_de_order():
    recs = world()
    p = plan_query(recs[5], LLM, DistractorConfig(k=4, seed=3, relevant_position=2))
    de = {q.pid: 1 - q.annotations[LLM]["p_no_response"] for q in recs[5].passages}
    slots = [i for i in range(4) if i != 1]
    # the j-th most distracting passage of each arm sits in the same slot
    weak_rank = sorted(slots, key=lambda s: -de[p.weak[s]])
    hard_rank = sorted(slots, key=lambda s: -de[p.hard[s]])
    assert weak_rank == hard_rank


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=4, max_size=12), st.integers(2, 4),
       st.integers(0, 50))
def test_plan_invariants(strengths, k, seed):
    rec = make_record(0, ["R"] + [round(s, 3) for s in strengths])
    annotate([rec])
    cfg = DistractorConfig(k=k, seed=seed)
    p = plan_query(rec, LLM, cfg)
    de = sorted(round(s, 3) for s in strengths)
    if len(strengths) < 2 * (k - 1):
        assert isinstance(p, str)
        return
    if isinstance(p, str):  # only ties at the boundary may prevent separation
        assert "separate" in p or "overlap" in p
        return
    m = k - 1
    assert len(p.weak) == len(p.hard) == k
    assert max(p.weak_de) < min(p.hard_de)
    if p.weak_adapted:
        assert sorted(p.weak_de) == pytest.approx(de[:m])
    else:
        assert all(d < cfg.weak_threshold for d in p.weak_de)
    if p.hard_adapted:
        assert sorted(p.hard_de) == pytest.approx(de[-m:])
    else:
        assert all(d > cfg.hard_threshold for d in p.hard_de)


def test_study_statistics_are_exact(tmp_path):
    rng = np.random.default_rng(7)
    specs = []
    for _i in range(30):
        n = int(rng.integers(6, 10))
        strengths = list(np.round(rng.random(n), 3))
        pos = int(rng.integers(0, n + 1))
        specs.append(strengths[:pos] + ["R"] + strengths[pos:])
    recs = [make_record(i, s, split="test" if i % 3 else "train") for i, s in enumerate(specs)]
    annotate(recs)
    by_qid = {r.qid: r for r in recs}
    logger = RunLogger(tmp_path / "run")
    rep = run_distractor_sensitivity(recs, FakeScorer(), llm=LLM, out_dir=tmp_path / "out", k=4, n_bootstrap=300,
                                     seed=2, cache=None, progress=False, logger=logger)
    rows = list(csv.DictReader(open(rep.paths["per_query_csv"])))
    assert len(rows) == rep.n_queries == rep.meta["n_queries"] > 10
    weak = np.array([outcome_of(by_qid[r["qid"]], r["weak_pids"].split()) == "correct" for r in rows], float)
    hard = np.array([outcome_of(by_qid[r["qid"]], r["hard_pids"].split()) == "correct" for r in rows], float)
    assert [r["weak_outcome"] for r in rows] == [outcome_of(by_qid[r["qid"]], r["weak_pids"].split()) for r in rows]
    w, h, d = rep.rows
    assert w["correct"] == pytest.approx(weak.mean()) and h["correct"] == pytest.approx(hard.mean())
    assert d["correct"] == pytest.approx(weak.mean() - hard.mean())
    assert d["correct_lo"] <= d["correct"] <= d["correct_hi"]
    assert w["correct"] + w["abstained"] + w["wrong"] == pytest.approx(1.0)
    if (weak != hard).any():
        assert d["p_wilcoxon"] == pytest.approx(wilcoxon(weak, hard).pvalue)
    assert d["n_discordant"] == int((weak != hard).sum())
    # hard distractors hurt the fake LLM: it answers the first decisive passage
    assert d["correct"] > 0
    adapted = [r for r in rows if r["weak_adapted"] == "True"]
    assert rep.meta["n_weak_adapted"] == len(adapted) == w["n_adapted"]
    if adapted:
        assert w["eff_threshold_median"] == pytest.approx(np.median([float(r["weak_max_de"]) for r in adapted]))
    for key in ("table_md", "table_csv", "per_query_csv", "png", "report_md", "summary_json"):
        assert rep.paths[key].is_file() and rep.paths[key].stat().st_size > 0
    assert rep.paths["png"].read_bytes()[:4] == b"\x89PNG"
    assert "adapted" in rep.markdown.lower() and f"{rep.n_queries}" in rep.markdown
    assert (tmp_path / "run" / "distractors_table.csv").is_file()
    assert logger._summary["distractors/acc_diff"] == pytest.approx(d["correct"])


def test_fixed_positions_give_known_accuracies(tmp_path):
    recs = world()
    last = run_distractor_sensitivity(recs, FakeScorer(), llm=LLM, out_dir=tmp_path / "a", k=3, relevant_position=3,
                                      n_bootstrap=100, cache=None, progress=False)
    # relevant last: weak distractors (DE <= 0.5) never decide, hard ones (DE > 0.5) always do
    assert last.n_queries == 4
    assert (last.rows[0]["correct"], last.rows[1]["correct"]) == (1.0, 0.0)
    assert last.rows[1]["wrong"] == 1.0
    first = run_distractor_sensitivity(recs, FakeScorer(), llm=LLM, out_dir=tmp_path / "b", k=3, relevant_position=1,
                                       n_bootstrap=100, cache=None, progress=False)
    assert first.rows[2]["correct"] == 0.0 and first.rows[2]["p_wilcoxon"] == 1.0


def test_rerun_hits_the_cache_and_runs_reproduce(tmp_path):
    recs = world()
    cache = AnnotationCache(tmp_path / "cache")
    fake = FakeScorer()
    a = run_distractor_sensitivity(recs, fake, llm=LLM, out_dir=tmp_path / "a", k=3, cache=cache, n_bootstrap=50,
                                   progress=False)
    n = fake.n_scored
    assert n == 2 * a.n_queries
    b = run_distractor_sensitivity(recs, fake, llm=LLM, out_dir=tmp_path / "b", k=3, cache=cache, n_bootstrap=50,
                                   progress=False)
    assert fake.n_scored == n
    assert json_safe(b.rows) == json_safe(a.rows)  # NaN-aware
    saved = read_context_runs(a.paths["runs_jsonl"])  # the graded answers the study wrote
    c = run_distractor_sensitivity(recs, saved, llm=LLM, out_dir=tmp_path / "c", k=3, n_bootstrap=50, progress=False)
    assert json_safe(c.rows) == json_safe(a.rows) and c.meta["source"] == "runs"


def test_annotations_are_computed_when_missing(tmp_path):
    recs = world()
    for r in recs:
        for p in r.passages:
            p.annotations.clear()
    rep = run_distractor_sensitivity(recs, FakeScorer(), llm=LLM, out_dir=tmp_path, k=3, cache=None, n_bootstrap=50,
                                     progress=False)
    assert rep.meta["annotations"]["missing"] == sum(len(r.passages) for r in recs)
    assert rep.n_queries == 4


def test_bad_parameters():
    with pytest.raises(TypeError, match="unknown"):
        run_distractor_sensitivity(world(), FakeScorer(), llm=LLM, out_dir="/tmp/x", bogus=1)
    with pytest.raises(ValueError):
        DistractorConfig(weak_threshold=0.9, hard_threshold=0.1)
    with pytest.raises(ValueError):
        DistractorConfig(k=3, relevant_position=4)


class _Recorder:
    """Anything with ``.log`` stands for a W&B run."""

    def __init__(self):
        self.logged = []

    def log(self, payload):
        self.logged.append(payload)


def test_logs_tables_images_and_scalars_to_a_wandb_run(tmp_path):
    import wandb

    run = _Recorder()
    rep = run_distractor_sensitivity(world(), FakeScorer(), llm=LLM, out_dir=tmp_path, k=3, cache=None,
                                     n_bootstrap=50, progress=False, logger=run)
    (payload,) = run.logged
    assert isinstance(payload["distractors/table"], wandb.Table)
    assert isinstance(payload["distractors/per_query"], wandb.Table)
    assert isinstance(payload["distractors/png"], wandb.Image)
    assert payload["distractors/acc_diff"] == pytest.approx(rep.scalars["acc_diff"])
    assert payload["distractors/n_queries"] == rep.n_queries
