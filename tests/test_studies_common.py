"""Shared study machinery (statistics, selection, runs lookup, cache-only reruns) and the fake LLM the study tests use.

The fake scorer is a deterministic function of the prompt's passages, so every statistic of a study
can be recomputed exactly by the tests:

* a relevant passage reads ``... ANS[<gold>] ...`` (``HIDDEN`` marks one the LLM cannot use);
* an irrelevant passage reads ``... LURE[<lure>] STR[<s>]``: its distracting strength ``s``;
* answer: scan the passages in prompt order; the first *decisive* one decides -- a usable relevant
  passage gives its gold answer, a distractor with ``s > 0.5`` gives its lure -- and with no
  decisive passage the answer is ``NO-RESPONSE``;
* P(NO-RESPONSE): product over the passages of 0.05 (usable relevant), 0.9 (hidden relevant) or
  ``1 - s`` (distractor). Alone with the question, a distractor's DE is therefore exactly ``s``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.stats import binomtest, chi2, wilcoxon

from udcg_ltr.annotate.annotator import CachedScorer, CacheMiss, CacheOnlyScorer, ensure_annotations
from udcg_ltr.annotate.cache import AnnotationCache
from udcg_ltr.annotate.end_to_end import Context
from udcg_ltr.annotate.scorer import ScoreResult
from udcg_ltr.data.contexts import ContextRun
from udcg_ltr.data.schema import DataError, Passage, QueryRecord
from udcg_ltr.stats.bootstrap import paired_ratio_ci
from udcg_ltr.stats.paired import cochran_q, mcnemar_exact, wilcoxon_paired
from udcg_ltr.studies.common import answer_contexts, select_queries, split_scorer_or_runs

LLM = "fake-llm"
_ANS = re.compile(r"ANS\[([^\]]+)\]")
_LURE = re.compile(r"LURE\[([^\]]+)\] STR\[([0-9.]+)\]")


def passage_fate(text: str) -> tuple[str, str | None, float]:
    """``(kind, value, single-passage P(NO-RESPONSE))``: kind ``gold`` / ``hidden`` / ``lure`` / ``weak``."""
    m = _ANS.search(text)
    if m:
        return ("hidden", m.group(1), 0.9) if "HIDDEN" in text else ("gold", m.group(1), 0.05)
    m = _LURE.search(text)
    if m:
        s = float(m.group(2))
        return ("lure" if s > 0.5 else "weak"), m.group(1), 1.0 - s
    return "weak", None, 1.0


def fake_answer(texts) -> str:
    for text in texts:
        kind, value, _ = passage_fate(text)
        if kind in ("gold", "lure"):
            return value
    return "NO-RESPONSE"


class FakeScorer:
    """Deterministic stand-in for an LLMScorer (see the module docstring); counts the prompts it scores."""

    name = LLM
    prompt_version = "fake-v1"
    dtype = "float32"
    quantize = None
    max_new_tokens = 24

    def __init__(self):
        self.n_scored = 0

    def score(self, items, *, generate=False, progress=None, on_batch=None, **_):
        items = list(items)
        out = []
        for it in items:
            texts = [t for _, t in it.passages]
            p = float(np.prod([passage_fate(t)[2] for t in texts])) if texts else 1.0
            out.append(ScoreResult(p, fake_answer(texts) if generate else None, sum(len(t.split()) for t in texts)))
        self.n_scored += len(items)
        for start in range(0, len(items), 3):  # persist in small batches, as the real scorer does
            idx = list(range(start, min(start + 3, len(items))))
            if on_batch is not None:
                on_batch(idx, [out[i] for i in idx])
        return out


def make_record(i: int, spec, *, split: str = "test") -> QueryRecord:
    """A query whose pool follows ``spec`` in retrieval order: ``"R"`` (usable relevant), ``"H"`` (hidden
    relevant) or a float ``s`` (a distractor of strength ``s``)."""
    gold = f"gold{i}"
    passages = []
    for j, item in enumerate(spec):
        if item in ("R", "H"):
            text = f"Passage {j} states that ANS[{gold}] is the answer" + (" HIDDEN" if item == "H" else "")
            rel = 1
        else:
            text = f"Passage {j} talks about LURE[lure{i}x{j}] STR[{float(item):.3f}]"
            rel = 0
        passages.append(Passage(pid=f"q{i}-p{j}", title=f"T{i}", text=text, rank=j + 1, score=10.0 - j,
                                relevance=rel))
    return QueryRecord(qid=f"q{i}", question=f"What is asked in question {i}?", answers=[gold], passages=passages,
                       split=split)


def annotate(records) -> None:
    """Single-passage annotations straight from the fake's rule (no scorer involved)."""
    for r in records:
        for p in r.passages:
            _, _, pnr = passage_fate(p.text)
            p.annotations[LLM] = {"p_no_response": pnr, "answer_alone": fake_answer([p.text])}


def outcome_of(record: QueryRecord, pids) -> str:
    """The graded outcome the fake must produce for ``pids`` (recomputed independently of the studies)."""
    texts = [record.passage(pid).text for pid in pids]
    answer = fake_answer(texts)
    if answer == "NO-RESPONSE":
        return "abstained"
    has_rel = any(record.passage(pid).relevance for pid in pids)
    return "correct" if (answer == record.answers[0] and has_rel) else "wrong"


# =============================================================================================
# statistics


def test_wilcoxon_matches_scipy_and_handles_no_difference():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2, 40).astype(float)
    b = rng.integers(0, 2, 40).astype(float)
    got = wilcoxon_paired(a, b)
    ref = wilcoxon(a, b, zero_method="wilcox")
    assert got["p"] == pytest.approx(ref.pvalue)
    assert got["n_nonzero"] == int((a != b).sum())
    same = wilcoxon_paired(a, a)
    assert same["p"] == 1.0 and same["n_nonzero"] == 0 and np.isnan(same["statistic"])


def test_mcnemar_exact_counts_discordant_pairs():
    a = np.array([1, 1, 1, 1, 1, 0, 0, 1, 0, 1], bool)
    b = np.array([0, 0, 0, 0, 1, 0, 1, 1, 0, 0], bool)
    got = mcnemar_exact(a, b)
    assert (got["only_a"], got["only_b"]) == (5, 1)
    assert got["p"] == pytest.approx(binomtest(5, 6, 0.5).pvalue)
    assert mcnemar_exact(a, a)["p"] == 1.0


def test_cochran_q_against_the_textbook_formula():
    x = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0], [1, 0, 1], [1, 1, 0], [1, 0, 0]], float)
    n, k = x.shape
    c, r = x.sum(0), x.sum(1)
    # Q as k(k-1) sum (C_j - mean C)^2 / sum R_i (k - R_i), an algebraically equivalent form
    q = k * (k - 1) * ((c - c.mean()) ** 2).sum() / (r * (k - r)).sum()
    got = cochran_q(x)
    assert got["Q"] == pytest.approx(q) and got["df"] == k - 1
    assert got["p"] == pytest.approx(chi2.sf(q, k - 1))
    const = cochran_q(np.ones((5, 3)))
    assert np.isnan(const["Q"]) and const["p"] == 1.0


def test_paired_ratio_ci_brackets_the_ratio():
    rng = np.random.default_rng(0)
    a = (rng.random(200) < 0.2).astype(float)
    b = (rng.random(200) < 0.4).astype(float)
    ratio, lo, hi = paired_ratio_ci(a, b, 500, 0)
    assert ratio == pytest.approx(a.mean() / b.mean())
    assert lo < ratio < hi
    assert np.isnan(paired_ratio_ci(a, np.zeros(200), 100, 0)[0])


# =============================================================================================
# selection, runs, cache


def test_select_queries_orders_by_split_preference_and_counts_exclusions():
    recs = [make_record(i, ["R", 0.1], split=s) for i, s in enumerate(["train", "test", "val", "test", "train"])]
    recs.append(make_record(9, [0.1, 0.2], split="test"))
    sel, info = select_queries(recs, splits=("test", "val"), max_queries=3,
                               eligible=lambda r: None if any(p.relevance for p in r.passages) else "no relevant")
    assert [r.qid for r in sel] == ["q1", "q3", "q2"]
    assert info["excluded"] == {"no relevant": 1} and info["candidates"] == 4
    assert info["by_split"] == {"test": 2, "val": 1}


def test_split_scorer_or_runs():
    fake = FakeScorer()
    assert split_scorer_or_runs(LLM, fake) == (LLM, fake, None)
    assert split_scorer_or_runs(fake, None) == (LLM, fake, None)
    run = ContextRun("q1", 0, ["a"], "x", LLM)
    assert split_scorer_or_runs(LLM, [run]) == (LLM, None, [run])
    with pytest.raises(ValueError):
        split_scorer_or_runs(LLM, None)
    with pytest.raises(TypeError):
        split_scorer_or_runs(LLM, [1, 2])


def test_answer_contexts_from_scorer_and_from_runs_agree(tmp_path):
    recs = [make_record(0, [0.9, "R", 0.1]), make_record(1, ["R", 0.3])]
    by_qid = {r.qid: r for r in recs}
    ctxs = [Context("q0", 0, ("q0-p0", "q0-p1"), "a"), Context("q0", 1, ("q0-p1", "q0-p0"), "b"),
            Context("q1", 0, ("q1-p1",), "a")]
    runs = answer_contexts(by_qid, ctxs, llm=LLM, scorer=FakeScorer(), progress=False)
    assert [r.outcome for r in runs] == ["wrong", "correct", "abstained"]
    assert [outcome_of(by_qid[c.qid], c.pids) for c in ctxs] == [r.outcome for r in runs]
    assert [r.extra["kind"] for r in runs] == ["a", "b", "a"]
    # the same contexts looked up among ready-made (ungraded, shuffled) runs
    ready = [ContextRun(r.qid, 100 + i, list(r.pids), r.answer, LLM) for i, r in enumerate(runs)][::-1]
    looked = answer_contexts(by_qid, ctxs, llm=LLM, runs=ready, progress=False)
    assert [(r.qid, r.pids, r.outcome) for r in looked] == [(r.qid, r.pids, r.outcome) for r in runs]
    with pytest.raises(DataError, match="1 of 1 study contexts"):
        answer_contexts(by_qid, [Context("q1", 5, ("q1-p0",), "x")], llm=LLM, runs=ready, progress=False)


def test_cache_only_scorer_reads_entries_written_by_the_scorer(tmp_path):
    recs = [make_record(0, [0.9, "R"])]
    by_qid = {r.qid: r for r in recs}
    ctxs = [Context("q0", 0, ("q0-p1", "q0-p0"), "a")]
    cache = AnnotationCache(tmp_path / "c")
    first = answer_contexts(by_qid, ctxs, llm=LLM, scorer=CachedScorer(FakeScorer(), cache), progress=False)
    stub = CacheOnlyScorer(LLM, prompt_version=FakeScorer.prompt_version)
    again = answer_contexts(by_qid, ctxs, llm=LLM, scorer=CachedScorer(stub, cache), progress=False)
    assert [(r.answer, r.outcome, r.p_no_response) for r in again] == [(r.answer, r.outcome, r.p_no_response)
                                                                       for r in first]
    with pytest.raises(CacheMiss):
        answer_contexts(by_qid, [Context("q0", 1, ("q0-p0",), "b")], llm=LLM,
                        scorer=CachedScorer(stub, cache), progress=False)


def test_ensure_annotations_computes_only_missing_ones():
    recs = [make_record(0, ["R", 0.3]), make_record(1, [0.8, "R"])]
    annotate(recs[:1])
    fake = FakeScorer()
    info = ensure_annotations(recs, LLM, ["p_no_response", "answer_alone"], fake, progress=False)
    assert info["missing"] == 2 and fake.n_scored == 2
    assert recs[1].passages[0].annotations[LLM]["p_no_response"] == pytest.approx(0.2)
    assert recs[1].passages[0].annotations[LLM]["answer_alone"] == "lure1x0"
    with pytest.raises(DataError):
        ensure_annotations([make_record(2, ["R"])], LLM, ["p_no_response"], None)


@dataclass
class _Named:
    name: str = "other"


def test_ensure_annotations_refuses_another_llm():
    with pytest.raises(ValueError, match="annotations of"):
        ensure_annotations([make_record(0, ["R"])], LLM, ["p_no_response"], _Named(), progress=False)


def test_config_from_accepts_objects_mappings_and_overrides():
    from udcg_ltr.studies.common import config_from
    from udcg_ltr.studies.oracle import OracleConfig

    cfg = config_from({"config": {"ks": [5, 3], "splits": ["test"]}, "seed": 4}, OracleConfig)
    assert cfg.ks == (5, 3) and cfg.splits == ("test",) and cfg.seed == 4
    assert config_from({"config": cfg, "max_queries": 7}, OracleConfig).max_queries == 7
    with pytest.raises(TypeError, match="unknown"):
        config_from({"kk": 1}, OracleConfig)
