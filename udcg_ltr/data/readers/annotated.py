"""Reader for the shared annotated SQuAD set (``annotated/`` in the shared data folder).

``squad_top10.jsonl.gz``: one question a line (``qid, question, answers, article, split, passages[{pid,
title, text, rank, retrieval_score, has_answer, same_article, p_no_response, answer_alone}]``), relevance
= ``has_answer``, the LLM fields under ``annotations[ANNOTATED_LLM]``. ``squad_contexts.jsonl.gz``:
end-to-end answers on 5-passage contexts (:class:`ContextRun` s).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from udcg_ltr.data.contexts import ContextRun, read_context_runs
from udcg_ltr.data.jsonl import parse_lines
from udcg_ltr.data.readers._common import load_json, validate_as_in_file
from udcg_ltr.data.schema import DataError, Passage, QueryRecord, get_field, get_probability, get_str_list
from udcg_ltr.paths import shared_file

#: The LLM behind the shared annotations (the demo LLM), as an annotation key.
ANNOTATED_LLM = "qwen2.5-coder-0.5b-instruct"
#: Keys of ``meta.json`` that hold prompt text.
META_TEXT_FIELDS = ("system_prompt", "user_template", "document_template", "document_separator", "no_response_token")


def annotated_dir() -> Path:
    return shared_file("annotated")


def _passage(obj: Any, i: int) -> Passage:
    where = f"passages[{i}]"
    # checked here (not only by validate_record) so that the error names the file's own field
    annotation: dict[str, Any] = {"p_no_response": get_probability(obj, "p_no_response", where)}
    if (answer := get_field(obj, "answer_alone", str, where, optional=True)) is not None:
        annotation["answer_alone"] = answer
    same_article = get_field(obj, "same_article", bool, where, optional=True)
    score = get_field(obj, "retrieval_score", float, where, optional=True)
    return Passage(pid=str(get_field(obj, "pid", (str, int), where)),
                   title=get_field(obj, "title", str, where, optional=True, default=""),
                   text=get_field(obj, "text", str, where), rank=get_field(obj, "rank", int, where, optional=True),
                   score=None if score is None else float(score),
                   relevance=int(get_field(obj, "has_answer", bool, where)), annotations={ANNOTATED_LLM: annotation},
                   extra={"same_article": same_article} if same_article is not None else {})


def _record(obj: Any) -> QueryRecord:
    if not isinstance(obj, Mapping):
        raise DataError(f"expected a JSON object, got {type(obj).__name__}")
    article = get_field(obj, "article", int, optional=True)
    record = QueryRecord(qid=str(get_field(obj, "qid", (str, int))), question=get_field(obj, "question", str),
                         answers=get_str_list(obj, "answers"),
                         passages=[_passage(p, i) for i, p in enumerate(get_field(obj, "passages", list))],
                         split=get_field(obj, "split", str, optional=True),
                         extra={"article": article} if article is not None else {})
    return validate_as_in_file(record, names={"score": "retrieval_score", "relevance": "has_answer"})


def read_annotated_squad(path: str | os.PathLike | None = None) -> list[QueryRecord]:
    """The 400 annotated SQuAD questions with their MiniLM top-10 pools, every field type-checked."""
    path = Path(path) if path is not None else annotated_dir() / "squad_top10.jsonl.gz"
    return list(parse_lines(path, _record, unique=lambda r: r.qid))


def read_annotated_contexts(path: str | os.PathLike | None = None) -> list[ContextRun]:
    """The shared end-to-end answers (100 questions x 8 contexts of 5 passages) as ungraded runs."""
    path = Path(path) if path is not None else annotated_dir() / "squad_contexts.jsonl.gz"
    return read_context_runs(path, llm=ANNOTATED_LLM)


def read_annotation_meta(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """``meta.json``: the prompts, templates and decoding the annotations were made with (a JSON object
    holding every key of :data:`META_TEXT_FIELDS` as a string)."""
    path = Path(path) if path is not None else annotated_dir() / "meta.json"
    if not isinstance(meta := load_json(path), dict):
        raise DataError(f"expected a JSON object, got {type(meta).__name__}", path=str(path), line=1)
    for key in META_TEXT_FIELDS:  # the prompt pieces are rebuilt verbatim: each must be a string
        try:
            get_field(meta, key, str)
        except DataError as err:
            raise err.located(path=path) from None
    return meta
