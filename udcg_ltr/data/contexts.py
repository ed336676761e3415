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
from udcg_ltr.data.schema import DataError
from udcg_ltr.io import atomic_open


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
        for required in ("qid", "context_id", "pids", "answer"):
            if required not in obj:
                raise DataError("missing", field=required)
        if not isinstance(obj["pids"], list) or not all(isinstance(p, str) for p in obj["pids"]):
            raise DataError("expected a list of passage ids", field="pids")
        if not isinstance(obj["answer"], str):
            raise DataError("expected a string", field="answer")
        pnr = obj.get("p_no_response")
        if pnr is not None and (isinstance(pnr, bool) or not isinstance(pnr, (int, float)) or not 0 <= pnr <= 1):
            raise DataError(f"probability {pnr!r} outside [0, 1]", field="p_no_response")
        name = obj.get("llm", llm)
        if name is None:
            raise DataError("missing (and no default LLM name was given)", field="llm")
        outcome = obj.get("outcome")
        if outcome is not None and outcome not in ("correct", "abstained", "wrong"):
            raise DataError(f"unknown outcome {outcome!r}", field="outcome")
        return cls(qid=str(obj["qid"]), context_id=int(obj["context_id"]), pids=list(obj["pids"]),
                   answer=obj["answer"], llm=name, p_no_response=pnr, outcome=outcome,
                   extra=dict(obj.get("extra", {})))


def read_context_runs(path: str | os.PathLike, *, llm: str | None = None) -> list[ContextRun]:
    """Read end-to-end runs from JSONL; ``llm`` names the reader when lines do not carry it."""
    return list(parse_lines(path, lambda obj: ContextRun.from_dict(obj, llm=llm)))


def write_context_runs(path: str | os.PathLike, runs: Iterable[ContextRun]) -> Path:
    path = Path(path)
    with atomic_open(path, "w") as f:
        for run in runs:
            f.write(json.dumps(run.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n")
    return path
