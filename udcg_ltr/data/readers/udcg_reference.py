"""Reader for the UDCG authors' reference sample files (``udcg_reference/`` in the shared data).

Layout: one JSON array per file, each element::

    {"example_id": str, "question": str,
     "passages": [{"doc_id": str, "text": str, "is_relevant": bool,
                   "models_info": {LLM: {"no_res_prob": float}}}],      # optional
     "udcg": {LLM: float}}                                               # optional

Each element becomes a :class:`QueryRecord`: ``relevance`` is 1/0 from ``is_relevant``,
``annotations[LLM] = {"p_no_response": no_res_prob}`` (the P(NO-RESPONSE) of UDCG paper Eq. 2),
the passage order is the context order (``rank`` = position + 1) and the reference UDCG values
(Eq. 4, gamma = 1/3, k = number of passages) go to ``record.extra["reference_udcg"]`` so that our
implementation can be checked against theirs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from udcg_ltr.data.readers._common import get_field, parse_json_array, validate_as_in_file
from udcg_ltr.data.schema import DataError, Passage, QueryRecord
from udcg_ltr.paths import shared_file


def reference_dir() -> Path:
    return shared_file("udcg_reference")


def _passage(obj: Any, i: int) -> Passage:
    where = f"passages[{i}]"
    doc_id = get_field(obj, "doc_id", (str, int), where)
    text = get_field(obj, "text", str, where)
    relevant = get_field(obj, "is_relevant", bool, where)
    annotations: dict[str, dict[str, Any]] = {}
    info = get_field(obj, "models_info", dict, where, optional=True, default={})
    for llm, fields in info.items():
        fwhere = f"{where}.models_info[{llm!r}]"
        # checked here (not only by validate_record) so that the error names the file's own key
        p = get_field(fields, "no_res_prob", float, fwhere)
        if not 0.0 <= p <= 1.0:
            raise DataError(f"probability {p!r} outside [0, 1]", field=f"{fwhere}.no_res_prob")
        annotations[llm] = {"p_no_response": float(p)}
    return Passage(pid=str(doc_id), text=text, rank=i + 1, relevance=int(relevant), annotations=annotations)


def _reference_value(reference: Any, llm: str) -> float:
    value = float(get_field(reference, llm, float, "udcg"))
    if not 0.0 <= value <= 1.0:  # Eq. 4 is a sigmoid
        raise DataError(f"UDCG {value} outside [0, 1]", field=f"udcg.{llm}")
    return value


def _record(obj: Any) -> QueryRecord:
    if not isinstance(obj, Mapping):
        raise DataError(f"expected an object, got {type(obj).__name__}")
    qid = get_field(obj, "example_id", (str, int))
    question = get_field(obj, "question", str)
    raw = get_field(obj, "passages", list)
    passages = [_passage(p, i) for i, p in enumerate(raw)]
    extra: dict[str, Any] = {}
    reference = get_field(obj, "udcg", dict, optional=True)
    if reference is not None:
        extra["reference_udcg"] = {llm: _reference_value(reference, llm) for llm in reference}
    record = QueryRecord(qid=str(qid), question=question, passages=passages, extra=extra)
    return validate_as_in_file(record, qid="example_id", names={"pid": "doc_id", "relevance": "is_relevant"})


def read_udcg_reference(path: str | os.PathLike | None = None) -> list[QueryRecord]:
    """Read one of the UDCG reference files (default: ``dataset_with_udcg.json`` of the shared data).

    Malformed input raises :class:`DataError` naming the file, the line where the record starts
    and the field, e.g. ``[1].passages[2].is_relevant``; an ``example_id`` given twice and an empty
    array are errors.
    """
    path = Path(path) if path is not None else reference_dir() / "dataset_with_udcg.json"
    return parse_json_array(path, _record, unique=lambda r: r.qid, unique_field="example_id")
