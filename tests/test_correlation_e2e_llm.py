"""End-to-end runs with a real (tiny) LLM: SmolLM2-135M through the annotate helper's scorer (slow).

SmolLM2 is a useless judge (DEVELOPERS.md) but exercises the real code path: prompt items with the
context's passages in prompt order, greedy answers, P(NO-RESPONSE), grading, and the study on top.
"""

from __future__ import annotations

import pytest

from udcg_ltr.data.schema import Passage, QueryRecord

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2_scorer():
    try:
        from udcg_ltr.annotate import llms

        return llms.load_llm("smollm2")
    except (ImportError, AttributeError):
        pass
    try:
        from udcg_ltr.annotate.demo_llm import ensure_smollm2
        from udcg_ltr.annotate.scorer import DecodingConfig, LLMScorer

        return LLMScorer(str(ensure_smollm2(install=False)), decoding=DecodingConfig(batch_size=4, max_new_tokens=8),
                         progress=False)
    except Exception as err:  # model package absent or not convertible here
        pytest.skip(f"SmolLM2 fixture unavailable: {type(err).__name__}: {err}")


def tiny_records(llm: str) -> list[QueryRecord]:
    facts = [("Varno Keltis", "1874", "Kelmora"), ("Dunmere Works", "1911", "Tolma")]
    records = []
    for q, (name, year, place) in enumerate(facts):
        passages = [
            Passage(f"q{q}-a", f"{name} was born in {year}.", title=name, rank=1, relevance=1),
            Passage(f"q{q}-b", f"{name} lived in {place}.", title=name, rank=2, relevance=0),
            Passage(f"q{q}-c", "The river flows into a lake.", title="River", rank=3, relevance=0),
            Passage(f"q{q}-d", "A city was founded long ago.", title="City", rank=4, relevance=0),
        ]
        for i, p in enumerate(passages):
            p.annotations[llm] = {"p_no_response": 0.1 + 0.2 * i, "answer_alone": year if i == 0 else "NO-RESPONSE"}
        records.append(QueryRecord(f"q{q}", f"In which year was {name} born?", [year], passages,
                                   split=("train", "test")[q]))
    return records


def test_run_contexts_with_smollm2(smollm2_scorer, tmp_path):
    from udcg_ltr.annotate.end_to_end import run_contexts
    from udcg_ltr.fit.sampling import sample_contexts
    from udcg_ltr.studies.correlation import StudySpec, run_correlation_study

    name = smollm2_scorer.name
    records = tiny_records(name)
    contexts = sample_contexts(records, n_contexts=4, k=2, top_n=4, seed=0)
    runs = run_contexts(records, contexts, smollm2_scorer, progress=False)
    assert len(runs) == len(contexts) == 8
    for c, r in zip(contexts, runs):
        assert r.pids == list(c.pids) and r.llm == name
        assert 0.0 <= r.p_no_response <= 1.0
        assert r.outcome in ("correct", "abstained", "wrong")
        if r.outcome == "correct":
            assert c.has_relevant
    # The same prompts scored again give the same greedy answers (deterministic decoding).
    again = run_contexts(records, contexts[:2], smollm2_scorer, progress=False)
    assert [r.answer for r in again] == [r.answer for r in runs[:2]]
    res = run_correlation_study(records, runs, llm=name, k=2, out_dir=tmp_path, progress=False,
                                spec=StudySpec(n_bootstrap=20, metrics=["udcg", "precision", "random"]))
    assert res.paths["report_md"].is_file()
