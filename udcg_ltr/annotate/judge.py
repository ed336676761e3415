"""LLM judges: passage relevance (UDCG paper, Figure 5) and answer grading (Figure 6).

The templates are faithful equivalents of the paper's prompts (same criteria, a JSON reply with ``motivation``
and ``grade``), not verbatim copies, and plain configuration (:class:`JudgeConfig`). Replies are parsed
tolerantly (:func:`parse_judge_reply`: code fences, surrounding text, single quotes, a grade as a word or with
its label, a bare ``grade: A``); anything else is *unparseable*: logged, counted, never mapped to a grade.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from udcg_ltr.annotate.cache import cache_key, lookup
from udcg_ltr.annotate.grading import Outcome, grade_answer

log = logging.getLogger(__name__)

RELEVANCE_TEMPLATE = """\
Decide whether a document is RELEVANT or IRRELEVANT for answering a question. A document is RELEVANT \
only if it contains information that directly supports at least one of the acceptable answers.

RELEVANT examples:
- Question: "in which city is the novel the great gatsby set" | Acceptable answers: ['West Egg, Long Island']
  Document: "...Nick Carraway rents a house in West Egg, on Long Island, in the summer of 1922..."
  -> states the setting given by an acceptable answer
- Question: "when was the album follow the leader released" | Acceptable answers: ['August 18, 1998']
  Document: "Follow the Leader ... came out on August 18, 1998"
  -> states the exact release date

IRRELEVANT examples:
- Question: "in which city is the novel the great gatsby set" | Acceptable answers: ['West Egg, Long Island']
  Document: "Long Island has inspired many American writers and its estates..."
  -> mentions Long Island, but not as the novel's setting
- Question: "who played bobby byrd in get on up" | Acceptable answers: ['Nelsan Ellis']
  Document: "Reviewers praised the actor cast as Bobby Byrd and his chemistry with the lead..."
  -> talks about the casting without naming the actor

How to evaluate:
1. Identify the information an acceptable answer requires. Only the meaning counts; ignore \
capitalization, punctuation, grammar and word order.
2. Check whether the document states that information directly or through an obvious inference.
3. Watch for the usual mistakes:
   - the document shares keywords or the topic but not the answer;
   - the document holds part of the answer and would need outside knowledge to complete it;
   - the document discusses a related subject without answering the question.

Now the new case. Do not apologize or revise yourself; we only want to evaluate this document.
```
Question: {question}
Acceptable answers list: {answers}
Document: {document}
```

Evaluate the document for this question as one of:
A: RELEVANT
B: IRRELEVANT

Reply with a JSON object in this format:
{{
    "motivation": "A short explanation (at most 2 sentences)",
    "grade": "A" or "B"
}}"""

GRADING_TEMPLATE = """\
Grade a predicted answer as CORRECT, INCORRECT or ABSTAINED against a list of acceptable answers.

## Rules

The predicted answer is CORRECT when:
- it holds the essential information of at least one acceptable answer;
- it holds nothing that contradicts it;
- when the acceptable answer is a list, at least one of its items is present.

The predicted answer is INCORRECT when:
- it contradicts an acceptable answer;
- it states wrong facts, even with hedges such as "I think" or "maybe".

The predicted answer is ABSTAINED when:
- it declines to answer, or only expresses uncertainty, without giving substantive information;
- it says things like "I don't know", "I am not sure", "I cannot answer", "NO-RESPONSE".

## Examples

CORRECT:
```
Question: Who were the two Apollo 11 astronauts who walked on the Moon?
Acceptable: ['Neil Armstrong and Buzz Aldrin', 'Armstrong and Aldrin']
"Armstrong and Aldrin" (essential information present)
"I believe it was Neil Armstrong and Buzz Aldrin" (hedged but right)
```

INCORRECT:
```
Question: Who were the two Apollo 11 astronauts who walked on the Moon?
Acceptable: ['Neil Armstrong and Buzz Aldrin']
"Only Neil Armstrong" (incomplete where both are required)
"Armstrong, Aldrin and Collins" (adds a wrong person)
"Nobody walked on the Moon" (contradicts the acceptable answer)
```

ABSTAINED:
```
Question: Who were the two Apollo 11 astronauts who walked on the Moon?
"I don't know who they were"
"I'm not sure about this"
"I cannot provide that information"
"NO-RESPONSE"
```

## Notes
- Ignore capitalization, punctuation, grammar and order.
- Do not penalize information left out that the question makes obvious.
- Do not penalize small typos in names.
- Grade with the question and the acceptable answers only, even if you believe they are wrong.

---

Now the new case. Do not apologize or revise yourself; we only want to grade this answer.
```
Question: {question}
Acceptable answers list: {target}
Predicted answer: {predicted_answer}
```

Grade the predicted answer as one of:
A: CORRECT
B: INCORRECT
C: ABSTAINED

Reply with a JSON object in this format:
{{
 "motivation": "A short motivation for the grade (at most 2 sentences).",
 "grade": "A", "B", or "C"
}}"""

#: Words a judge may write instead of the grade letter.
_GRADE_WORDS = {"RELEVANT": "A", "IRRELEVANT": "B", "NOT RELEVANT": "B", "CORRECT": "A", "INCORRECT": "B",
                "WRONG": "B", "ABSTAINED": "C", "ABSTAIN": "C", "ABSTENTION": "C"}


@dataclass(frozen=True)
class JudgeReply:
    """A parsed judge reply; ``grade`` is ``None`` when the reply could not be parsed."""

    grade: str | None
    motivation: str | None
    raw: str


@dataclass
class JudgeResults:
    """Replies in input order plus the number that could not be parsed."""

    replies: list[JudgeReply] = field(default_factory=list)

    @property
    def unparseable(self) -> int:
        return sum(r.grade is None for r in self.replies)


def _normalise_grade(value: Any, allowed: Sequence[str]) -> str | None:
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        return None
    text = str(value).strip().strip("\"'`*.()[] ").upper()
    labelled = re.match(r"^([A-Z])\s*[:).\-]\s*\S", text)  # "A: RELEVANT", "B) INCORRECT"
    candidates = (text, labelled and labelled.group(1), _GRADE_WORDS.get(text))
    return next((grade for grade in candidates if grade and grade in allowed), None)


def _balanced_objects(text: str) -> list[str]:
    """Every top-level ``{...}`` substring (brace matching, string-aware)."""
    out, depth, start, quote, escape = [], 0, -1, "", False
    for i, ch in enumerate(text):
        if quote:
            if escape or ch == "\\":
                escape = not escape
            elif ch == quote:
                quote = ""
            continue
        if ch in "\"'" and depth > 0:
            # An apostrophe inside free text (it's) is not a quote: only treat it as one after : , {
            if ch == '"' or text[:i].rstrip()[-1:] in ":,{[":
                quote = ch
            continue
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append(text[start:i + 1])
    return out


def _load_object(blob: str) -> dict | None:
    # The last try is for single-quoted JSON with apostrophes inside: swap the quote styles.
    swapped = re.sub(r"(?<=[{,:\s])'|'(?=\s*[:,}])", '"', blob)
    for loader, text in ((json.loads, blob), (ast.literal_eval, blob), (json.loads, swapped)):
        try:
            obj = loader(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(obj, dict):
            return obj
    return None


def parse_judge_reply(text: str, allowed: Sequence[str] = ("A", "B")) -> JudgeReply:
    """Parse ``{"motivation": ..., "grade": ...}`` out of a judge's reply (see the module docstring)."""
    allowed = tuple(a.upper() for a in allowed)
    raw = text if isinstance(text, str) else str(text)
    body = re.sub(r"```(?:json|JSON|python)?", "", raw)
    for obj in filter(None, map(_load_object, _balanced_objects(body))):
        lowered = {str(k).strip().lower(): v for k, v in obj.items()}
        if (grade := _normalise_grade(lowered.get("grade"), allowed)) is not None:
            motivation = lowered.get("motivation")
            return JudgeReply(grade, str(motivation) if motivation is not None else None, raw)
    # No usable object: a bare `grade: A` / `"grade": "B"` anywhere (truncated JSON, prose).
    m = re.search(r"""["']?grade["']?\s*[:=]\s*["']?([A-Za-z][A-Za-z ]*?)["'\s,}.]""", body + " ")
    if m and (grade := _normalise_grade(m.group(1), allowed)) is not None:
        mm = re.search(r"""["']?motivation["']?\s*[:=]\s*["'](.*?)["']\s*[,}]""", body, flags=re.S)
        return JudgeReply(grade, mm.group(1) if mm else None, raw)
    return JudgeReply(None, None, raw)


@dataclass(frozen=True)
class JudgeConfig:
    """The judge's prompt template, allowed grades and reply budget."""

    template: str
    allowed: tuple[str, ...]
    max_new_tokens: int = 128
    system_prompt: str | None = None

    def version(self) -> str:
        blob = json.dumps([self.template, list(self.allowed), self.system_prompt], ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


RELEVANCE_JUDGE = JudgeConfig(RELEVANCE_TEMPLATE, ("A", "B"))
GRADING_JUDGE = JudgeConfig(GRADING_TEMPLATE, ("A", "B", "C"))


class LLMJudge:
    """Prompts an LLM (``generate_chat``) with a judge template and parses the replies (kept in ``cache``)."""

    task = "judge"
    default_config: JudgeConfig | None = None

    def __init__(self, llm, config: JudgeConfig | None = None, *, cache=None):
        self.llm, self.cache = llm, cache
        self.config = config or self.default_config
        if self.config is None:
            raise TypeError(f"{type(self).__name__} needs a JudgeConfig")

    def _run(self, prompts: Sequence[str], *, progress: bool | None = None) -> JudgeResults:
        name, cfg = getattr(self.llm, "name", "llm"), self.config
        keys = [cache_key(name, cfg.version(), self.task, p, [], {"max_new_tokens": cfg.max_new_tokens})
                for p in prompts]
        replies = [None if hit is None else hit["reply"] for hit in lookup(self.cache, keys, "reply")]
        if todo := [i for i, r in enumerate(replies) if r is None]:
            system = [{"role": "system", "content": cfg.system_prompt}] if cfg.system_prompt else []
            texts = self.llm.generate_chat([system + [{"role": "user", "content": prompts[i]}] for i in todo],
                                           max_new_tokens=cfg.max_new_tokens, progress=progress)
            for i, t in zip(todo, texts):
                replies[i] = t
            if self.cache is not None:
                self.cache.put_many([(keys[i], {"reply": replies[i]}, {"task": self.task, "llm": name}) for i in todo])
        results = JudgeResults([parse_judge_reply(r or "", cfg.allowed) for r in replies])
        if results.unparseable:
            bad = next(r.raw for r in results.replies if r.grade is None)
            log.warning("%s judge (%s): %d of %d replies unparseable (first: %r)", self.task, name,
                        results.unparseable, len(results.replies), bad[:200])
        return results


class RelevanceJudge(LLMJudge):
    """Relevance of a document to a question with known acceptable answers (grade A = relevant)."""

    task = "judge_relevance"
    default_config = RELEVANCE_JUDGE

    def judge_many(self, cases: Sequence[tuple[str, Sequence[str], str]], *, progress: bool | None = None) -> JudgeResults:
        """``cases``: ``(question, acceptable answers, document text)``."""
        fill = self.config.template.format
        return self._run([fill(question=q, answers=list(a), document=d) for q, a, d in cases], progress=progress)


class AnswerJudge(LLMJudge):
    """Grades an end-to-end answer as CORRECT (A) / INCORRECT (B) / ABSTAINED (C)."""

    task = "judge_grading"
    default_config = GRADING_JUDGE
    _OUTCOMES = {"A": Outcome.CORRECT, "B": Outcome.WRONG, "C": Outcome.ABSTAINED}

    def grade_many(self, cases: Sequence[tuple[str, Sequence[str], str]], *,
                   context_has_relevant: Sequence[bool] | None = None, fallback: str | None = "rule",
                   progress: bool | None = None) -> tuple[list[Outcome | None], JudgeResults]:
        """Outcomes of ``(question, gold, predicted answer)`` cases: as in :func:`.grade_answer`, CORRECT
        without a relevant passage is WRONG; unparseable ones get the rule's grade (``fallback="rule"``)."""
        fill = self.config.template.format
        results = self._run([fill(question=q, target=list(g), predicted_answer=a) for q, g, a in cases],
                            progress=progress)
        outcomes: list[Outcome | None] = []
        for i, ((_, gold, answer), reply) in enumerate(zip(cases, results.replies)):
            has_rel = True if context_has_relevant is None else bool(context_has_relevant[i])
            if reply.grade is None:
                by_rule = grade_answer(answer, gold, context_has_relevant=has_rel)
                outcomes.append(by_rule if fallback == "rule" else None)
            else:
                verdict = self._OUTCOMES[reply.grade]
                outcomes.append(Outcome.WRONG if verdict is Outcome.CORRECT and not has_rel else verdict)
        return outcomes, results
