"""annotate_records / CachedScorer / baselines with a deterministic fake LLM (no model needed)."""

from __future__ import annotations

import hashlib

import pytest

from udcg_ltr.annotate.annotator import CachedScorer, annotate_records
from udcg_ltr.annotate.baselines import (
    MonteCarloConfig,
    abstention_rate,
    erag_labels,
    monte_carlo_p_no_response,
)
from udcg_ltr.annotate.cache import AnnotationCache
from udcg_ltr.annotate.prompts import PromptConfig, PromptItem, ScoreResult
from udcg_ltr.data.schema import Passage, QueryRecord


def _h(*parts) -> float:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


class FakeScorer:
    """Deterministic stand-in for LLMScorer that counts what it computes."""

    name = "fake-llm"
    dtype = "float32"
    quantize = None
    batch_size = 3
    max_new_tokens = 24
    prompt = PromptConfig()

    def __init__(self):
        self.scored: list[PromptItem] = []
        self.logprob_calls = 0
        self.sampled = 0

    @property
    def prompt_version(self):
        return self.prompt.version()

    def score(self, items, *, generate=False, progress=None, on_batch=None):
        out = []
        items = list(items)
        for start in range(0, len(items), self.batch_size):
            batch = list(range(start, min(start + self.batch_size, len(items))))
            res = []
            for i in batch:
                it = items[i]
                self.scored.append(it)
                answer = None
                if generate:
                    answer = "NO-RESPONSE" if _h(it.question, it.passages) > 0.5 else it.passages[0][1].split()[-1]
                res.append(ScoreResult(_h(it.question, it.passages), answer, 10 + len(it.passages[0][1])))
            out.extend(res)
            if on_batch:
                on_batch(batch, res)
        return out

    def answer_logprobs(self, items, answers, *, progress=None):
        self.logprob_calls += len(items)
        return [-_h(it.question, it.passages, a) * len(a) for it, a in zip(items, answers)]

    def sample_answers(self, item, n, temperature, *, seed=0, max_new_tokens=None):
        self.sampled += 1
        return ["NO-RESPONSE" if _h(seed, j) < 0.3 else "an answer" for j in range(n)]


def _records():
    return [QueryRecord(f"q{i}", f"question {i}?", [f"gold{i}", "alt"],
                        [Passage(f"p{i}-{j}", f"text {i} {j} gold{i}" if j == 0 else f"text {i} {j}", title=f"T{j}")
                         for j in range(4)]) for i in range(5)]


def test_annotate_fills_fields_and_second_run_is_free(tmp_path):
    records = _records()
    fake = FakeScorer()
    stats = annotate_records(records, fake, AnnotationCache(tmp_path),
                             fields=["p_no_response", "answer_alone", "erag", "answer_logprob"], progress=False)
    assert stats.passages == 20
    assert stats.by_task["score"] == {"computed": 20, "cached": 0}
    assert stats.by_task["answer_logprob"] == {"computed": 20, "cached": 0}
    assert len(fake.scored) == 20 and fake.logprob_calls == 40  # two gold answers each
    for r in records:
        for p in r.passages:
            ann = p.annotations["fake-llm"]
            assert ann["p_no_response"] == pytest.approx(_h(r.question, [(p.title, p.text)]))
            assert ann["prompt_version"] == fake.prompt_version
            assert ann["erag_em"] == float(ann["answer_alone"] == r.answers[0])
            assert {"erag_f1", "erag_contains", "answer_logprob", "n_prompt_tokens"} <= set(ann)
    first = [p.annotations["fake-llm"] for r in records for p in r.passages]

    again = _records()
    fake2 = FakeScorer()
    stats2 = annotate_records(again, fake2, AnnotationCache(tmp_path),
                              fields=["p_no_response", "answer_alone", "erag", "answer_logprob"], progress=False)
    assert stats2.computed == 0 and stats2.cached == 40
    assert fake2.scored == [] and fake2.logprob_calls == 0
    assert [p.annotations["fake-llm"] for r in again for p in r.passages] == first


def test_answers_are_recomputed_when_only_p_was_cached(tmp_path):
    fake = FakeScorer()
    annotate_records(_records(), fake, AnnotationCache(tmp_path), fields=["p_no_response"], progress=False)
    stats = annotate_records(_records(), fake, AnnotationCache(tmp_path), fields=["answer_alone"], progress=False)
    assert stats.by_task["score"] == {"computed": 20, "cached": 0}
    stats = annotate_records(_records(), fake, AnnotationCache(tmp_path), fields=["p_no_response"], progress=False)
    assert stats.by_task["score"] == {"computed": 0, "cached": 20}


def test_prompt_or_precision_change_misses_the_cache(tmp_path):
    cache = AnnotationCache(tmp_path)
    fake = FakeScorer()
    annotate_records(_records(), fake, cache, fields=["p_no_response"], progress=False)
    other = FakeScorer()
    other.prompt = PromptConfig(system_prompt="another instruction")
    assert annotate_records(_records(), other, cache, fields=["p_no_response"], progress=False).computed == 20
    bf16 = FakeScorer()
    bf16.dtype = "bfloat16"
    assert annotate_records(_records(), bf16, cache, fields=["p_no_response"], progress=False).computed == 20


def test_interrupted_run_resumes_without_rescoring(tmp_path):
    class Boom(RuntimeError):
        pass

    class Crashing(FakeScorer):
        def score(self, items, *, generate=False, progress=None, on_batch=None):
            seen = 0

            def stop_after_two(batch, res):
                nonlocal seen
                on_batch(batch, res)
                seen += 1
                if seen == 2:
                    raise Boom
            return super().score(items, generate=generate, progress=progress, on_batch=stop_after_two)

    with pytest.raises(Boom):
        annotate_records(_records(), Crashing(), AnnotationCache(tmp_path), progress=False)
    done = AnnotationCache(tmp_path)
    assert len(done) == 6  # two batches of 3 persisted before the crash
    fake = FakeScorer()
    stats = annotate_records(_records(), fake, done, progress=False)
    assert stats.by_task["score"] == {"computed": 14, "cached": 6}
    assert len(fake.scored) == 14
    final = AnnotationCache(tmp_path)
    assert len(final) == 20 and final.stats()["duplicate_lines"] == 0


def test_cached_scorer_without_cache_and_unknown_fields():
    fake = FakeScorer()
    cs = CachedScorer(fake)
    items = [PromptItem("q", [("t", "x")])] * 2
    assert [r.p_no_response for r in cs.score(items)] == [_h("q", [("t", "x")])] * 2
    assert cs.stats.by_task["score"] == {"computed": 1, "cached": 1}  # the repeat is served, not recomputed
    with pytest.raises(ValueError, match="unknown annotation field"):
        annotate_records(_records(), fake, None, fields=["utility"])


def test_monte_carlo_field_is_cached_and_order_independent(tmp_path):
    fake = FakeScorer()
    records = _records()
    mc = MonteCarloConfig(n=20, temperature=0.7)
    annotate_records(records, fake, AnnotationCache(tmp_path), fields=["p_no_response_mc"], mc=mc, progress=False)
    values = [p.annotations["fake-llm"]["p_no_response_mc"] for r in records for p in r.passages]
    assert fake.sampled == 20 and all(0.0 <= v <= 1.0 for v in values)
    reversed_records = _records()[::-1]
    fake2 = FakeScorer()
    annotate_records(reversed_records, fake2, None, fields=["p_no_response_mc"], mc=mc, progress=False)
    values2 = [p.annotations["fake-llm"]["p_no_response_mc"] for r in reversed_records[::-1] for p in r.passages]
    assert values2 == values
    fake3 = FakeScorer()
    stats = annotate_records(_records(), fake3, AnnotationCache(tmp_path), fields=["p_no_response_mc"], mc=mc,
                             progress=False)
    assert fake3.sampled == 0 and stats.by_task["mc"]["cached"] == 20


def test_erag_labels_and_abstention_rate():
    assert erag_labels("The year 1998.", ["1998"]) == {"erag_em": 0.0, "erag_f1": pytest.approx(2 / 3),
                                                       "erag_contains": 1.0}
    assert erag_labels("1998", ["1998", "in 1998"])["erag_em"] == 1.0
    assert erag_labels("NO-RESPONSE", ["no response"]) == {"erag_em": 0.0, "erag_f1": 0.0, "erag_contains": 0.0}
    assert abstention_rate(["NO-RESPONSE", "x", "I don't know", "y"]) == 0.5
    with pytest.raises(ValueError):
        abstention_rate([])
    with pytest.raises(ValueError):
        MonteCarloConfig(n=0)
    p, answers = monte_carlo_p_no_response(FakeScorer(), PromptItem("q", []), MonteCarloConfig(n=10, seed=3))
    assert p == sum(a == "NO-RESPONSE" for a in answers) / 10


def test_repeated_prompts_are_computed_once(tmp_path):
    fake = FakeScorer()
    records = _records()[:2]
    records.append(QueryRecord("dup", records[0].question, records[0].answers,
                               [Passage("x", records[0].passages[1].text, title=records[0].passages[1].title)]))
    cache = AnnotationCache(tmp_path)
    stats = annotate_records(records, fake, cache, fields=["p_no_response"], progress=False)
    assert stats.passages == 9 and stats.computed == 8 and len(fake.scored) == 8
    assert records[2].passages[0].annotations["fake-llm"] == records[0].passages[1].annotations["fake-llm"]
    assert cache.stats()["duplicate_lines"] == 0
