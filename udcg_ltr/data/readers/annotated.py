"""Reader for the shared annotated SQuAD set (``annotated/`` in the shared data folder).

``squad_top10.jsonl.gz``: one question a line (``qid, question, answers, article, split,
passages[{pid, title, text, rank, retrieval_score, has_answer, same_article, p_no_response,
answer_alone}]``), read into :class:`QueryRecord` s with relevance = ``has_answer`` and the LLM
fields under ``annotations[ANNOTATED_LLM]``. ``squad_contexts.jsonl.gz``: end-to-end answers on
5-passage contexts, read as ready-made :class:`ContextRun` s.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from udcg_ltr.data.contexts import ContextRun, read_context_runs
from udcg_ltr.data.jsonl import parse_lines
from udcg_ltr.data.schema import DataError, Passage, QueryRecord, validate_record
from udcg_ltr.paths import shared_file

#: The LLM behind the shared annotations (the demo LLM), as an annotation key.
ANNOTATED_LLM = "qwen2.5-coder-0.5b-instruct"


def annotated_dir() -> Path:
    return shared_file("annotated")


def _passage(obj: dict[str, Any], i: int) -> Passage:
    where = f"passages[{i}]"
    for key in ("pid", "text", "has_answer", "p_no_response"):
        if key not in obj:
            raise DataError("missing", field=f"{where}.{key}")
    if not isinstance(obj["has_answer"], bool):
        raise DataError(f"expected true/false, got {obj['has_answer']!r}", field=f"{where}.has_answer")
    annotation = {"p_no_response": obj["p_no_response"]}
    if "answer_alone" in obj:
        annotation["answer_alone"] = obj["answer_alone"]
    return Passage(
        pid=str(obj["pid"]), title=obj.get("title", ""), text=obj["text"], rank=obj.get("rank"),
        score=obj.get("retrieval_score"), relevance=int(obj["has_answer"]),
        annotations={ANNOTATED_LLM: annotation},
        extra={"same_article": obj["same_article"]} if "same_article" in obj else {},
    )


def _record(obj: dict[str, Any]) -> QueryRecord:
    for key in ("qid", "question", "answers", "passages"):
        if key not in obj:
            raise DataError("missing", field=key)
    if not isinstance(obj["passages"], list):
        raise DataError("expected a list", field="passages")
    record = QueryRecord(
        qid=str(obj["qid"]), question=obj["question"], answers=list(obj["answers"]),
        passages=[_passage(p, i) for i, p in enumerate(obj["passages"])], split=obj.get("split"),
        extra={"article": obj["article"]} if "article" in obj else {},
    )
    return validate_record(record)


def read_annotated_squad(path: str | os.PathLike | None = None) -> list[QueryRecord]:
    """The 400 annotated SQuAD questions with their MiniLM top-10 pools, in file order."""
    path = Path(path) if path is not None else annotated_dir() / "squad_top10.jsonl.gz"
    return list(parse_lines(path, _record))


def read_annotated_contexts(path: str | os.PathLike | None = None) -> list[ContextRun]:
    """The shared end-to-end answers (100 questions x 8 contexts of 5 passages) as ungraded runs."""
    path = Path(path) if path is not None else annotated_dir() / "squad_contexts.jsonl.gz"
    return read_context_runs(path, llm=ANNOTATED_LLM)


def read_annotation_meta(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """``meta.json``: the prompts, templates and decoding the annotations were made with."""
    path = Path(path) if path is not None else annotated_dir() / "meta.json"
    with open(path, encoding="utf-8") as f:
        return json.load(f)
