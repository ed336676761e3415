"""The whole study on a synthetic world with known utilities; end-to-end runs; the shared SQuAD runs."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass

import numpy as np
import pytest

from udcg_ltr.annotate.end_to_end import grade_runs, load_shared_runs, prompt_items, run_contexts, run_summary
from udcg_ltr.data.contexts import ContextRun
from udcg_ltr.data.schema import Passage, QueryRecord
from udcg_ltr.fit.pairs import build_context_table
from udcg_ltr.fit.sampling import sample_contexts
from udcg_ltr.fit.synthetic import SYNTHETIC_LLM, synthetic_study_data
from udcg_ltr.fit.weights import load_weights
from udcg_ltr.metrics.table import METRIC_NAMES
from udcg_ltr.studies.correlation import (
    BENCH_LINE_METRICS,
    DEFAULT_METRICS,
    REFERENCE,
    STUDY_ROWS,
    SWEEP_METRICS,
    THETA_ROWS,
    StudySpec,
    SweepSpec,
    compute_context_metrics,
    row_label,
    run_correlation_study,
)


@pytest.fixture(scope="module")
def synthetic():
    return synthetic_study_data(90, seed=5)


@pytest.fixture(scope="module")
def study(synthetic, tmp_path_factory):
    records, runs = synthetic
    out = tmp_path_factory.mktemp("study")
    return run_correlation_study(records, runs, llm=SYNTHETIC_LLM, out_dir=out,
                                 spec=StudySpec(n_bootstrap=300, seed=0), sweep=SweepSpec([2, 5]), progress=False)


def test_udcg_correlates_with_outcomes_and_beats_random(study):
    udcg, rnd = study.row("udcg"), study.row("random")
    # The outcomes were generated from the utilities: UDCG must track them; a random metric must not.
    assert udcg["spearman"] > 0.4 and udcg["spearman_lo"] > 0.2
    assert abs(rnd["spearman"]) < 0.2
    assert rnd["spearman_p_vs_udcg"] < 0.01
    assert study.row("udcg_theta")["spearman"] > 0.4
    assert udcg["kendall"] > 0.3
    for r in study.rows:
        if r["metric"] != "answer_prob" and not np.isnan(r["spearman"]):
            assert r["spearman_lo"] <= r["spearman"] <= r["spearman_hi"]


def test_fit_and_report_splits_are_separate(synthetic, study, tmp_path):
    records, runs = synthetic
    split = {r.qid: r.split for r in records}
    fit_q = {r.qid for r in runs if split[r.qid] in ("train", "val")}
    assert study.meta["n_fit_queries"] == len(fit_q)
    assert study.meta["n_report_queries"] == sum(1 for q in {r.qid for r in runs} if split[q] == "test")
    assert study.weights["full"].meta["n_queries"] == len(fit_q)
    assert study.meta["fit_report_overlap"] == []
    # Scrambling the test queries' outcomes must not change the fitted weights nor the calibrated gamma.
    rng = np.random.default_rng(0)
    scrambled = [ContextRun(r.qid, r.context_id, r.pids, r.answer, r.llm,
                            outcome=str(rng.choice(["correct", "abstained", "wrong"])) if split[r.qid] == "test"
                            else r.outcome) for r in runs]
    other = run_correlation_study(records, scrambled, llm=SYNTHETIC_LLM, out_dir=tmp_path, progress=False,
                                  spec=StudySpec(n_bootstrap=50, metrics=["udcg", "udcg_gamma_star", "udcg_theta"],
                                                 theta_variants=["full"]))
    np.testing.assert_allclose(other.weights["full"].alpha, study.weights["full"].alpha)
    assert other.gamma.gamma == study.gamma.gamma
    assert other.spearman("udcg") != study.spearman("udcg")  # ... while the test-split table does change


def test_outputs_written(study):
    p = study.paths
    for key in ("table_test_md", "table_test_csv", "table_all_csv", "per_query_csv", "weights_json", "weights_png",
                "gamma_png", "bars_png", "k_sweep_png", "k_sweep_csv", "report_md", "summary_json"):
        assert p[key].is_file() and p[key].stat().st_size > 0, key
    for key in ("weights_png", "bars_png", "k_sweep_png", "gamma_png"):
        assert p[key].read_bytes()[:4] == b"\x89PNG"
    with open(p["table_test_csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["metric"] for r in rows] == list(DEFAULT_METRICS)
    assert float(rows[0]["spearman"]) == pytest.approx(study.spearman("udcg"))
    assert "| UDCG |" in study.markdown and "Kendall tau-b" in study.markdown
    assert {w.variant for w in load_weights(p["weights_json"])} == {"full", "relevance_only", "binary"}
    assert sorted({r["k"] for r in study.k_sweep}) == [2, 5]
    with open(p["per_query_csv"], newline="") as f:
        per_query = list(csv.DictReader(f))
    assert len(per_query) == study.meta["n_queries"] == 90
    line = study.bench_line()
    assert re.fullmatch(r"spearman: " + " ".join(rf"{k}=-?\d\.\d{{3}}" for k in BENCH_LINE_METRICS), line)


def test_row_keys_are_the_metric_keys_plus_the_study_rows():
    # One scheme: every row is a metric-table key or a study-only row, never both, all lower case.
    assert not set(STUDY_ROWS) & set(METRIC_NAMES)
    known = set(METRIC_NAMES) | set(STUDY_ROWS)
    for rows in (DEFAULT_METRICS, SWEEP_METRICS, BENCH_LINE_METRICS, tuple(THETA_ROWS.values()), (REFERENCE,)):
        assert set(rows) <= known and set(rows) <= set(DEFAULT_METRICS), rows
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", k) for k in DEFAULT_METRICS)
    assert set(STUDY_ROWS) <= set(DEFAULT_METRICS)
    assert row_label("ndcg") == "nDCG" and row_label("udcg_gamma_star") == "UDCG (gamma*)" and row_label("x") == "x"
    with pytest.raises(ValueError, match="unknown metric 'UDCG'"):
        compute_context_metrics(build_context_table({}, [], "m", k=2), [], metrics=["UDCG"])


def test_files_name_rows_by_key_and_markdown_by_label(study):
    keys = [r["metric"] for r in study.summary["report"]]
    assert keys == list(DEFAULT_METRICS)
    with open(study.paths["per_query_csv"], newline="") as f:
        header = next(csv.reader(f))
    assert "udcg_gamma_star|spearman" in header and not any("UDCG" in h for h in header)
    with open(study.paths["table_test_csv"], newline="") as f:
        header = next(csv.reader(f))
    assert "spearman_p_vs_udcg" in header and "udcg_gain_pct" in header
    assert {r["metric"] for r in study.k_sweep} <= set(SWEEP_METRICS)
    assert set(study.scalars) == {f"spearman/{k}" for k in DEFAULT_METRICS}
    assert "| UDCG (gamma*) |" in study.markdown and "| udcg_gamma_star |" not in study.markdown


def test_na_queries_are_counted_not_averaged(synthetic, tmp_path):
    records, runs = synthetic
    # Make every context of one test query "wrong": its correlation is NA for every metric.
    q = next(r.qid for r in records if r.split == "test")
    runs2 = [ContextRun(r.qid, r.context_id, r.pids, r.answer, r.llm, outcome="wrong" if r.qid == q else r.outcome)
             for r in runs]
    res = run_correlation_study(records, runs2, llm=SYNTHETIC_LLM, out_dir=tmp_path, progress=False,
                                spec=StudySpec(n_bootstrap=50, metrics=["udcg", "precision"]))
    row = next(r for r in res.per_query if r["qid"] == q)
    assert row["outcome_constant"] and np.isnan(row["udcg|spearman"])
    defined = [r["udcg|spearman"] for r in res.per_query if r["split"] == "test" and not np.isnan(r["udcg|spearman"])]
    assert res.row("udcg")["spearman_n"] == len(defined)
    assert res.row("udcg")["spearman"] == pytest.approx(np.mean(defined))
    assert res.row("udcg")["spearman_na"] >= 1


def test_log_to_fake_wandb(study):
    import wandb

    class FakeRun:
        def __init__(self):
            self.logged = []

        def log(self, payload):
            self.logged.append(payload)

    class FakeLightningLogger:
        def __init__(self):
            self.experiment = FakeRun()

    lg = FakeLightningLogger()
    payload = study.log_to(lg)
    assert lg.experiment.logged == [payload]
    assert isinstance(payload["correlation/table_report"], wandb.Table)
    assert isinstance(payload["correlation/bars_png"], wandb.Image)
    assert payload["correlation/spearman/udcg"] == pytest.approx(study.spearman("udcg"))


def test_context_metric_values_by_hand():
    llm = "m"
    ann = lambda p, alone, lp=None: {llm: {"p_no_response": p, "answer_alone": alone,  # noqa: E731
                                           **({"answer_logprob": lp} if lp is not None else {})}}
    rec = QueryRecord("q", "?", ["paris"], [
        Passage("a", "x", relevance=1, annotations=ann(0.2, "Paris", -0.5)),
        Passage("b", "x", relevance=0, annotations=ann(0.6, "Lyon", -3.0)),
        Passage("c", "x", relevance=1, annotations=ann(0.0, "NO-RESPONSE", -1.0)),
        Passage("d", "x", relevance=0, annotations=ann(0.9, "NO-RESPONSE")),
    ])
    runs = [ContextRun("q", 0, ["b", "a"], "", llm, outcome="correct"),
            ContextRun("q", 1, ["d", "b"], "", llm, outcome="wrong")]
    t = build_context_table([rec], runs, llm, k=2)
    v = compute_context_metrics(t, [rec])
    np.testing.assert_allclose(v["precision"], [0.5, 0.0])
    np.testing.assert_allclose(v["mrr"], [0.5, 0.0])
    np.testing.assert_allclose(v["hits"], [1.0, 0.0])
    # nDCG@2 with IDCG@2 from the pool (2 relevant): (1/log2 3) / (1 + 1/log2 3)
    np.testing.assert_allclose(v["ndcg"], [(1 / np.log2(3)) / (1 + 1 / np.log2(3)), 0.0])
    np.testing.assert_allclose(v["map"], [0.5 / 2, 0.0])  # AP with R = 2 relevant in the pool
    np.testing.assert_allclose(v["erag"], [0.5, 0.0])  # "Paris" contains the gold answer, "Lyon" does not
    np.testing.assert_allclose(v["answer_prob"][0], -1.75)
    assert np.isnan(v["answer_prob"][1])  # passage d lacks answer_logprob
    np.testing.assert_allclose(v["ra_nwg"], [0.5, 0.0])
    # UDCG, Eq. 4: context 0 holds u = -0.4 (b) and +0.8 (a)
    np.testing.assert_allclose(v["udcg"][0], 1 / (1 + np.exp(-(0.8 + (-0.4) / 3) / 2)))


# ---- end-to-end runs --------------------------------------------------------------------------


@dataclass
class _Result:
    p_no_response: float
    answer: str
    n_prompt_tokens: int = 0


class FakeScorer:
    """Answers the gold answer when a passage text holds it, NO-RESPONSE otherwise; records the prompts."""

    name = "fake-llm"

    def __init__(self):
        self.items = []

    def score(self, items, *, generate=False):
        assert generate
        self.items.extend(items)
        out = []
        for it in items:
            hit = next((x for _, x in it.passages if "gold" in x), None)
            out.append(_Result(0.1 if hit else 0.9, "gold" if hit else "NO-RESPONSE"))
        return out


def test_run_contexts_with_a_fake_scorer():
    rec = QueryRecord("q", "what?", ["gold"], [
        Passage("r", "it is gold", title="T1", relevance=1, rank=1),
        Passage("n1", "nothing", title="T2", relevance=0, rank=2),
        Passage("n2", "also nothing", title="T3", relevance=0, rank=3),
        Passage("n3", "nope", title="T4", relevance=0, rank=4),
    ])
    contexts = sample_contexts([rec], n_contexts=4, k=2, seed=0)
    scorer = FakeScorer()
    runs = run_contexts([rec], contexts, scorer, progress=False)
    assert len(runs) == 4 and all(r.llm == "fake-llm" for r in runs)
    for c, r, item in zip(contexts, runs, scorer.items):
        assert item.question == "what?"
        texts = {p.pid: (p.title, p.text) for p in rec.passages}
        assert list(item.passages) == [texts[pid] for pid in c.pids]  # prompt order preserved
        assert r.outcome == ("correct" if "r" in c.pids else "abstained")
    assert run_summary(runs)["correct"] == 2


def test_grading_requires_a_relevant_passage():
    rec = QueryRecord("q", "?", ["gold"], [Passage("a", "x", relevance=0), Passage("b", "gold", relevance=1)])
    runs = [ContextRun("q", 0, ["a"], "gold", "m"), ContextRun("q", 1, ["a", "b"], "gold", "m"),
            ContextRun("q", 2, ["a"], "NO-RESPONSE", "m"), ContextRun("q", 3, ["b"], "silver", "m")]
    assert [r.outcome for r in grade_runs([rec], runs)] == ["wrong", "correct", "abstained", "wrong"]
    assert len(prompt_items([rec], runs)) == 4


@pytest.mark.shared_data
def test_shared_squad_runs_load_as_graded_runs(annotated_squad):
    runs = load_shared_runs(annotated_squad)
    s = run_summary(runs)
    assert s["contexts"] == 800 and s["queries"] == 100 and s["ungraded"] == 0
    assert all(len(r.pids) == 5 for r in runs)
    assert s["correct"] > 0 and s["abstained"] > 0 and s["wrong"] > 0
    by = {r.qid: r for r in annotated_squad}
    for r in runs:
        if r.outcome == "correct":
            assert any(by[r.qid].passage(p).is_relevant() for p in r.pids)


@pytest.mark.shared_data
def test_study_on_shared_squad(annotated_squad, tmp_path):
    runs = load_shared_runs(annotated_squad)
    res = run_correlation_study(annotated_squad, runs, llm="qwen2.5-coder-0.5b-instruct", out_dir=tmp_path,
                                spec=StudySpec(n_bootstrap=200), progress=False)
    assert res.meta["n_report_queries"] == 31 and res.meta["n_fit_queries"] == 69
    assert -1 <= res.spearman("udcg") <= 1
    assert res.row("udcg")["spearman_n"] + res.row("udcg")["spearman_na"] == 31
    assert res.row("udcg", "all")["spearman_n"] + res.row("udcg", "all")["spearman_na"] == 100
    # queries whose outcomes never vary are NA for every metric
    n_const = sum(r["outcome_constant"] for r in res.per_query)
    assert res.row("udcg", "all")["spearman_na"] >= n_const > 0


class WorldScorer:
    """Answers a query's gold answer when some passage of the prompt contains it, else NO-RESPONSE."""

    name = SYNTHETIC_LLM

    def __init__(self, records):
        self.gold = {r.question: r.answers for r in records}
        self.calls = 0

    def score(self, items, *, generate=False):
        from udcg_ltr.text import has_answer

        self.calls += len(items)
        out = []
        for it in items:
            gold = self.gold[it.question]
            hit = any(has_answer(text, gold) for _, text in it.passages)
            out.append(_Result(0.05 if hit else 0.95, gold[0] if hit else "NO-RESPONSE"))
        return out


def test_k_sweep_resample_and_truncate_with_a_scorer(synthetic):
    from udcg_ltr.fit.sampling import ContextSamplingConfig
    from udcg_ltr.studies.correlation import k_sweep_rows

    records, runs = synthetic
    records = records[:30]
    keep = {r.qid for r in records}
    runs = [r for r in runs if r.qid in keep]
    split_of = {r.qid: r.split for r in records}
    scorer = WorldScorer(records)
    spec = StudySpec(fit_splits=("train", "val"), report_split=None, metrics=["udcg", "hits", "random"], C=1.0,
                     gamma_grid=[1 / 3], n_bootstrap=20, seed=0)
    common = dict(llm=SYNTHETIC_LLM, split_of=split_of, spec=spec, progress=False)
    rows = k_sweep_rows(records, runs, sweep=SweepSpec([1, 3], "resample", ContextSamplingConfig(n_contexts=4, top_n=12)),
                        scorer=scorer, **common)
    assert scorer.calls == 30 * 4 * 2  # fresh contexts for each k, all answered by the LLM
    assert {r["k"] for r in rows} == {1, 3} and {r["outcome_source"] for r in rows} == {"llm"}
    # With this scorer the outcome is exactly "the context holds an answer-bearing passage": HITS is perfect.
    assert all(r["spearman"] == pytest.approx(1.0) for r in rows if r["metric"] == "hits")
    trunc = k_sweep_rows(records, runs, sweep=SweepSpec([2], "truncate"), scorer=scorer, **common)
    assert scorer.calls == 30 * 4 * 2 + len(runs) and trunc[0]["outcome_source"] == "llm"
    no_llm = k_sweep_rows(records, runs, sweep=SweepSpec([2], "truncate"), **common)
    assert no_llm[0]["outcome_source"] == "full_context"
    with pytest.raises(ValueError, match="needs a scorer"):
        k_sweep_rows(records, runs, sweep=SweepSpec([2], "resample"), **common)
    with pytest.raises(ValueError, match="mode must be .* got 'cut'"):
        SweepSpec([2], "cut")


def test_records_without_splits_get_a_noted_hash_split(synthetic, tmp_path):
    import copy

    records, runs = synthetic
    unsplit = [copy.copy(r) for r in records]
    for r in unsplit:
        r.split = None
    res = run_correlation_study(unsplit, runs, llm=SYNTHETIC_LLM, out_dir=tmp_path, progress=False,
                                spec=StudySpec(n_bootstrap=20, metrics=["udcg", "udcg_theta"], theta_variants=["full"]))
    assert res.meta["split_note"] and "hash" in res.meta["split_note"]
    by = res.meta["queries_by_split"]
    assert set(by) == {"train", "val", "test"} and sum(by.values()) == 90
    assert by["train"] > by["test"] > 0
    assert res.meta["split_note"] in res.markdown


def test_run_contexts_cached_through_the_annotation_cache(tmp_path):
    from udcg_ltr.annotate.cache import AnnotationCache

    class CountingScorer(FakeScorer):
        prompt_version = "test-v1"

        def score(self, items, *, generate=False, progress=None, on_batch=None):
            out = super().score(items, generate=generate)
            if on_batch is not None:
                on_batch(list(range(len(items))), out)
            return out

    rec = QueryRecord("q", "what?", ["gold"], [
        Passage("r", "it is gold", title="T", relevance=1, rank=1),
        Passage("n1", "nothing", title="T", relevance=0, rank=2),
        Passage("n2", "nope", title="T", relevance=0, rank=3),
    ])
    contexts = sample_contexts([rec], n_contexts=4, k=2, seed=0)
    scorer = CountingScorer()
    first = run_contexts([rec], contexts, scorer, AnnotationCache(tmp_path / "cache"), progress=False)
    assert len(scorer.items) == 4
    # A new process: a fresh cache object over the same folder; nothing is recomputed.
    again = run_contexts([rec], contexts, scorer, AnnotationCache(tmp_path / "cache"), progress=False)
    assert len(scorer.items) == 4
    assert [(r.answer, r.outcome, r.p_no_response) for r in again] == [(r.answer, r.outcome, r.p_no_response)
                                                                       for r in first]
    # The key covers the passages in order: the reversed context is a new prompt.
    from udcg_ltr.fit.sampling import SampledContext

    flipped = [SampledContext("q", 9, tuple(reversed(contexts[0].pids)), contexts[0].has_relevant, "positive")]
    run_contexts([rec], flipped, scorer, AnnotationCache(tmp_path / "cache"), progress=False)
    assert len(scorer.items) == 5
