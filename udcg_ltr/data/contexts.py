"""End-to-end runs: an LLM's answer to a whole context (several passages, in prompt order).

One :class:`ContextRun` per (query, context): the passage ids in prompt order, the LLM's greedy
answer, its P(NO-RESPONSE) on that context, and once graded, the outcome (``correct``,
``abstained`` or ``wrong``; see :mod:`udcg_ltr.annotate.grading`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from udcg_ltr.data.jsonl import parse_lines
from udcg_ltr.data.schema import DataError, get_field, get_str_list
from udcg_ltr.io import atomic_open

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
        """A run from its JSON object; every field type-checked (``null`` ids, a ``"3"`` context id,
        a string for ``pids``, a NaN probability are :class:`DataError` s naming the field)."""
        if not isinstance(obj, Mapping):
            raise DataError(f"expected a JSON object, got {type(obj).__name__}")
        pids = get_str_list(obj, "pids")
        pnr = get_field(obj, "p_no_response", float, optional=True)
        if pnr is not None and not 0 <= pnr <= 1:
            raise DataError(f"probability {pnr!r} outside [0, 1]", field="p_no_response")
        name = get_field(obj, "llm", str, optional=True, default=llm)
        if name is None:
            raise DataError("missing (and no default LLM name was given)", field="llm")
        outcome = get_field(obj, "outcome", str, optional=True)
        if outcome is not None and outcome not in OUTCOMES:
            raise DataError(f"unknown outcome {outcome!r}", field="outcome")
        return cls(qid=str(get_field(obj, "qid", (str, int))), context_id=get_field(obj, "context_id", int),
                   pids=pids, answer=get_field(obj, "answer", str), llm=name, p_no_response=pnr, outcome=outcome,
                   extra=dict(get_field(obj, "extra", dict, optional=True, default={})))


def read_context_runs(path: str | os.PathLike, *, llm: str | None = None) -> list[ContextRun]:
    """Read end-to-end runs from JSONL; ``llm`` names the reader when lines do not carry it.

    A (qid, context_id, llm) given twice and an empty file are errors naming the file and line.
    """
    return list(parse_lines(path, lambda obj: ContextRun.from_dict(obj, llm=llm),
                            unique=lambda r: (r.qid, r.context_id, r.llm), unique_field="context_id"))


def write_context_runs(path: str | os.PathLike, runs: Iterable[ContextRun]) -> Path:
    path = Path(path)
    with atomic_open(path, "w") as f:
        for run in runs:
            f.write(json.dumps(run.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n")
    return path
