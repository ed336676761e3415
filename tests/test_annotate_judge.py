"""LLM judges and relevance labelling, with scripted LLM replies (no model needed)."""

from __future__ import annotations

import pytest

from udcg_ltr.annotate.cache import AnnotationCache
from udcg_ltr.annotate.grading import Outcome
from udcg_ltr.annotate.judge import (
    GRADING_TEMPLATE,
    RELEVANCE_TEMPLATE,
    AnswerJudge,
    RelevanceJudge,
    parse_judge_reply,
)
from udcg_ltr.annotate.relevance import label_relevance
from udcg_ltr.data.schema import DataError, Passage, QueryRecord


class ScriptedLLM:
    """Replies from a function of the prompt; records the conversations it got."""

    name = "scripted"

    def __init__(self, reply):
        self.reply = reply
        self.calls: list[list[dict]] = []

    def generate_chat(self, conversations, *, max_new_tokens=128, progress=None):
        self.calls.extend(conversations)
        return [self.reply(c[-1]["content"]) for c in conversations]


@pytest.mark.parametrize("text,grade,motivation", [
    ('{"motivation": "It states the date.", "grade": "A"}', "A", "It states the date."),
    ('```json\n{\n  "motivation": "no",\n  "grade": "B"\n}\n```', "B", "no"),
    ("{'motivation': 'single quotes', 'grade': 'A'}", "A", "single quotes"),
    ("{'motivation': 'the document's wording', 'grade': 'B'}", "B", "the document's wording"),
    ('Here you go: {"motivation": "m", "grade": "a"} Let me know!', "A", "m"),
    ('{"motivation": "m", "grade": "B: IRRELEVANT"}', "B", "m"),
    ('{"motivation": "m", "grade": "IRRELEVANT"}', "B", "m"),
    ('{"Motivation": "m", "Grade": ["A"]}', "A", "m"),
    ('{"motivation": "cut off by max_new_tokens", "grade": "A"', "A", "cut off by max_new_tokens"),
    ("grade: B", "B", None),
])
def test_tolerant_parsing(text, grade, motivation):
    reply = parse_judge_reply(text, ("A", "B"))
    assert reply.grade == grade
    assert reply.motivation == motivation


@pytest.mark.parametrize("text", ["", "I think it is relevant.", '{"motivation": "m", "grade": "D"}',
                                  '{"motivation": "m"}', '{"grade": 1}', "grade: maybe"])
def test_unparseable_replies_have_no_grade(text):
    assert parse_judge_reply(text, ("A", "B")).grade is None


def test_grading_allows_c_and_words():
    assert parse_judge_reply('{"grade": "C"}', ("A", "B", "C")).grade == "C"
    assert parse_judge_reply('{"grade": "ABSTAINED"}', ("A", "B", "C")).grade == "C"
    assert parse_judge_reply('{"grade": "C"}', ("A", "B")).grade is None


def test_templates_have_their_placeholders():
    assert RELEVANCE_TEMPLATE.format(question="Q?", answers=["a"], document="D.").count("Q?") == 1
    text = GRADING_TEMPLATE.format(question="Q?", target=["a"], predicted_answer="P!")
    assert "P!" in text and '"grade"' in text


def _records():
    return [
        QueryRecord("q1", "When did X happen?", ["1998"], [
            Passage("a", "It happened in 1998 after a long wait."), Passage("b", "Nothing relevant here.")]),
        QueryRecord("q2", "Who wrote Y?", ["Smith"], [Passage("c", "Y was written by Smith."),
                                                      Passage("d", "Y is a book.")]),
    ]


def test_relevance_by_containment_and_dataset():
    records = _records()
    stats = label_relevance(records, "contains")
    assert [p.relevance for r in records for p in r.passages] == [1, 0, 1, 0]
    assert stats.relevant == 2 and stats.unlabelled == 0
    records[0].passages[1].relevance = None
    stats = label_relevance(records, "dataset")
    assert stats.unlabelled == 1 and stats.relevant == 2
    with pytest.raises(DataError, match="no gold answers"):
        label_relevance([QueryRecord("q", "?", [], [Passage("p", "t")])], "contains")
    with pytest.raises(ValueError, match="unknown relevance method"):
        label_relevance(records, "magic")


def test_relevance_by_llm_counts_unparseable(tmp_path):
    def reply(prompt: str) -> str:
        if "long wait" in prompt:
            return '```json\n{"motivation": "It states the year.", "grade": "A"}\n```'
        if "Nothing relevant" in prompt:
            return "{'motivation': 'Off topic', 'grade': 'B'}"
        if "written by Smith" in prompt:
            return "I cannot decide."
        return '{"motivation": "Mentions Y only", "grade": "B"}'

    llm = ScriptedLLM(reply)
    records = _records()
    cache = AnnotationCache(tmp_path)
    stats = label_relevance(records, "llm", judge=RelevanceJudge(llm, cache=cache))
    assert stats.unparseable == 1
    assert [p.relevance for r in records for p in r.passages] == [1, 0, None, 0]
    assert records[0].passages[0].extra["relevance_judge"] == {"grade": "A", "motivation": "It states the year."}
    assert "Acceptable answers list: ['1998']" in llm.calls[0][-1]["content"]
    # Fallback to containment for the unparseable one; replies come from the cache this time.
    records = _records()
    stats = label_relevance(records, "llm", judge=RelevanceJudge(llm, cache=cache), fallback="contains")
    assert stats.unparseable == 1 and records[1].passages[0].relevance == 1
    assert len(llm.calls) == 4  # nothing asked twice


def test_answer_judge_outcomes_and_relevant_context_rule():
    verdicts = {"Paris": '{"motivation": "ok", "grade": "A"}', "Lyon": '{"motivation": "wrong", "grade": "B"}',
                "NO-RESPONSE": '{"motivation": "abstains", "grade": "C"}', "Nice": "gibberish"}

    def reply(prompt: str) -> str:
        predicted = prompt.split("Predicted answer: ")[1].split("\n")[0]
        return verdicts[predicted]

    judge = AnswerJudge(ScriptedLLM(reply))
    cases = [("Capital of France?", ["Paris"], a) for a in ("Paris", "Lyon", "NO-RESPONSE", "Nice", "Paris")]
    outcomes, results = judge.grade_many(cases, context_has_relevant=[True, True, True, True, False])
    assert outcomes == [Outcome.CORRECT, Outcome.WRONG, Outcome.ABSTAINED, Outcome.WRONG, Outcome.WRONG]
    assert results.unparseable == 1
    outcomes, _ = judge.grade_many(cases[:4], fallback=None)
    assert outcomes[3] is None
