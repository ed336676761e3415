"""End-to-end runs: an LLM's answer to a whole context (several passages, in prompt order).

One :class:`ContextRun` per (query, context): the passage ids, the LLM's greedy answer, its
P(NO-RESPONSE) on that context and, once graded (:mod:`udcg_ltr.annotate.grading`), the outcome.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from udcg_ltr.data.jsonl import dumps_json, parse_lines, write_lines
from udcg_ltr.data.schema import DataError, get_field, get_probability, get_str_list

#: The graded outcomes of an end-to-end answer (:mod:`udcg_ltr.annotate.grading`).
OUTCOMES = ("correct", "abstained", "wrong")


@dataclass
class ContextRun:
    qid: str
    context_id: int
    pids: list[str]
    answer: str
    llm: str
    p_no_response: float | None = None
    outcome: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], *, llm: str | None = None) -> ContextRun:
        """A run from its JSON object, every field type-checked (a :class:`DataError` names the field)."""
        if not isinstance(obj, Mapping):
            raise DataError(f"expected a JSON object, got {type(obj).__name__}")
        pids = get_str_list(obj, "pids")
        pnr = get_probability(obj, "p_no_response", optional=True)
        if (name := get_field(obj, "llm", str, optional=True, default=llm)) is None:
            raise DataError("missing (and no default LLM name was given)", field="llm")
        outcome = get_field(obj, "outcome", str, optional=True)
        if outcome is not None and outcome not in OUTCOMES:
            raise DataError(f"unknown outcome {outcome!r}", field="outcome")
        return cls(qid=str(get_field(obj, "qid", (str, int))), context_id=get_field(obj, "context_id", int),
                   pids=pids, answer=get_field(obj, "answer", str), llm=name, p_no_response=pnr, outcome=outcome,
                   extra=dict(get_field(obj, "extra", dict, optional=True, default={})))


def read_context_runs(path: str | os.PathLike, *, llm: str | None = None) -> list[ContextRun]:
    """Read end-to-end runs from JSONL (``llm``: the reader, when lines do not name it); a (qid, context_id,
    llm) given twice and an empty file are errors."""
    return list(parse_lines(path, lambda obj: ContextRun.from_dict(obj, llm=llm),
                            unique=lambda r: (r.qid, r.context_id, r.llm), unique_field="context_id"))


def write_context_runs(path: str | os.PathLike, runs: Iterable[ContextRun]) -> Path:
    """Write runs one JSON object a line (:func:`~udcg_ltr.data.jsonl.dumps_json`: NaN refused, as on reading)."""
    return write_lines(path, (dumps_json(run.to_dict(), run.qid) for run in runs))
