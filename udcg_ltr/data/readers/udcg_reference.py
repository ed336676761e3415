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

from udcg_ltr.data.readers._common import get_field, parse_json_array
from udcg_ltr.data.schema import DataError, Passage, QueryRecord, validate_record
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
        # validate_record checks the [0, 1] range; the type is checked here to name the source key
        p = get_field(fields, "no_res_prob", float, fwhere)
        annotations[llm] = {"p_no_response": float(p)}
    return Passage(pid=str(doc_id), text=text, rank=i + 1, relevance=int(relevant), annotations=annotations)


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
        extra["reference_udcg"] = {llm: float(get_field(reference, llm, float, "udcg")) for llm in reference}
    record = QueryRecord(qid=str(qid), question=question, passages=passages, extra=extra)
    return validate_record(record)


def read_udcg_reference(path: str | os.PathLike | None = None) -> list[QueryRecord]:
    """Read one of the UDCG reference files (default: ``dataset_with_udcg.json`` of the shared data).

    Malformed input raises :class:`DataError` naming the file, the line where the record starts
    and the field, e.g. ``[1].passages[2].is_relevant``.
    """
    path = Path(path) if path is not None else reference_dir() / "dataset_with_udcg.json"
    return parse_json_array(path, _record)
