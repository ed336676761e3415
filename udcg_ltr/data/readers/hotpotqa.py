"""Reader for HotpotQA in the IRCoT layout (``hotpotqa/dev_300.jsonl.gz``).

Layout: one JSON object a line::

    {"question_id": str, "question_text": str,
     "answers_objects": [{"spans": [str], "number": str, "date": {...}}],
     "contexts": [{"id": str, "title": str, "paragraph_text": str, "is_supporting": bool}]}

Gold answers are the ``spans`` of all answer objects (distinct, in order); ``pid = f"{question_id}-{id}"``
(IRCoT ids are positions), ``rank`` = position + 1, ``relevance`` = ``is_supporting`` (the multi-hop
gold paragraphs; the others, TF-IDF neighbours, are distractors), ``extra["has_answer"]`` =
:func:`udcg_ltr.text.has_answer` (often false for a bridge paragraph, noisy for yes/no answers).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from udcg_ltr.data.jsonl import parse_lines
from udcg_ltr.data.readers._common import validate_as_in_file
from udcg_ltr.data.schema import DataError, Passage, QueryRecord, get_field, get_str_list
from udcg_ltr.paths import shared_file
from udcg_ltr.text import has_answer


def _answers(obj: Any) -> list[str]:
    answers: list[str] = []
    for i, ans in enumerate(get_field(obj, "answers_objects", list)):
        answers += get_str_list(ans, "spans", f"answers_objects[{i}]", optional=True)
        # numeric and date answers (DROP-style objects) are rendered when no span is given
        number = get_field(ans, "number", (str, int, float), f"answers_objects[{i}]", optional=True)
        if number not in (None, ""):
            answers.append(str(number))
    if not answers:
        raise DataError("no gold answer span", field="answers_objects")
    return list(dict.fromkeys(answers))  # distinct, in file order


def _record(obj: Any) -> QueryRecord:
    if not isinstance(obj, dict):
        raise DataError(f"expected a JSON object, got {type(obj).__name__}")
    qid = str(get_field(obj, "question_id", (str, int)))
    question = get_field(obj, "question_text", str)
    answers = _answers(obj)
    passages = []
    for j, ctx in enumerate(get_field(obj, "contexts", list)):
        where = f"contexts[{j}]"
        cid = str(get_field(ctx, "id", (str, int), where, optional=True, default=j))
        text = get_field(ctx, "paragraph_text", str, where)
        supporting = get_field(ctx, "is_supporting", bool, where)
        passages.append(Passage(
            pid=f"{qid}-{cid}", title=get_field(ctx, "title", str, where, optional=True, default=""),
            text=text, rank=j + 1, relevance=int(supporting), is_distractor=not supporting,
            extra={"has_answer": has_answer(text, answers), "context_id": cid}))
    record = QueryRecord(qid=qid, question=question, answers=answers, passages=passages)
    return validate_as_in_file(record, qid="question_id", passages="contexts",
                               names={"pid": "id", "relevance": "is_supporting"})


def read_hotpotqa(path: str | os.PathLike | None = None) -> list[QueryRecord]:
    """Read an IRCoT-layout HotpotQA file (default: the shared 300 dev questions); errors name the file,
    the line and the field (``contexts[3].is_supporting``)."""
    path = Path(path) if path is not None else shared_file("hotpotqa", "dev_300.jsonl.gz")
    return list(parse_lines(path, _record, unique=lambda r: r.qid, unique_field="question_id"))
