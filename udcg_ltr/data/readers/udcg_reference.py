"""Reader for the UDCG authors' reference sample files (``udcg_reference/`` in the shared data).

Layout: one JSON array per file, each element::

    {"example_id": str, "question": str,
     "passages": [{"doc_id": str, "text": str, "is_relevant": bool,
                   "models_info": {LLM: {"no_res_prob": float}}}],      # optional
     "udcg": {LLM: float}}                                               # optional

``relevance`` is ``is_relevant`` as 1/0, ``annotations[LLM] = {"p_no_response": no_res_prob}`` (UDCG
paper Eq. 2), ``rank`` = context position + 1, and the reference UDCG values (Eq. 4, gamma = 1/3,
k = number of passages) go to ``record.extra["reference_udcg"]`` to check our implementation.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from udcg_ltr.data.readers._common import parse_json_array, validate_as_in_file
from udcg_ltr.data.schema import DataError, Passage, QueryRecord, get_field, get_probability
from udcg_ltr.paths import shared_file


def _passage(obj: Any, i: int) -> Passage:
    where = f"passages[{i}]"
    doc_id = get_field(obj, "doc_id", (str, int), where)
    text = get_field(obj, "text", str, where)
    relevant = get_field(obj, "is_relevant", bool, where)
    annotations: dict[str, dict[str, Any]] = {}
    for llm, fields in get_field(obj, "models_info", dict, where, optional=True, default={}).items():
        # checked here (not only by validate_record) so that the error names the file's own key
        p = get_probability(fields, "no_res_prob", f"{where}.models_info[{llm!r}]")
        annotations[llm] = {"p_no_response": float(p)}
    return Passage(pid=str(doc_id), text=text, rank=i + 1, relevance=int(relevant), annotations=annotations)


def _reference_value(reference: Any, llm: str) -> float:
    value = float(get_field(reference, llm, float, "udcg"))
    if not 0.0 <= value <= 1.0:  # Eq. 4 is a sigmoid
        raise DataError(f"UDCG {value} outside [0, 1]", field=f"udcg.{llm}")
    return value


def _record(obj: Any) -> QueryRecord:
    qid = get_field(obj, "example_id", (str, int))
    question = get_field(obj, "question", str)
    passages = [_passage(p, i) for i, p in enumerate(get_field(obj, "passages", list))]
    extra: dict[str, Any] = {}
    if (reference := get_field(obj, "udcg", dict, optional=True)) is not None:
        extra["reference_udcg"] = {llm: _reference_value(reference, llm) for llm in reference}
    record = QueryRecord(qid=str(qid), question=question, passages=passages, extra=extra)
    return validate_as_in_file(record, qid="example_id", names={"pid": "doc_id", "relevance": "is_relevant"})


def read_udcg_reference(path: str | os.PathLike | None = None) -> list[QueryRecord]:
    """Read one of the UDCG reference files (default: ``dataset_with_udcg.json`` of the shared data); errors
    name the file, the line where the record starts and the field (``[1].passages[2].is_relevant``)."""
    path = Path(path) if path is not None else shared_file("udcg_reference", "dataset_with_udcg.json")
    return parse_json_array(path, _record, unique=lambda r: r.qid, unique_field="example_id")
