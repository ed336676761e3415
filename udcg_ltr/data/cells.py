"""Annotated grid cells in compact form: one LLM's values for one data set, ids and numbers only.

A cell folder (``annotations/<dataset>/<llm>/`` in the repository) holds three files and no passage text:

- ``passages.jsonl.gz``: one question a line, ``{"qid", "pids": [...], "p_no_response": [...],
  "answer_alone": [...]}``: the LLM's single-passage P(NO-RESPONSE) (Eq. 2) and greedy answer for each pool
  passage, aligned with ``pids``;
- ``contexts.jsonl.gz``: one end-to-end context a line, ``{"qid", "context_id", "pids" (prompt order),
  "p_no_response", "answer"}``;
- ``provenance.json``: the LLM, its sha256, prompt version, decoding, precision mode, machine, sizes, times.

:func:`read_cell` joins a cell to the records read from ``../shared/data`` (which hold the texts): every id must
be found there, or a :class:`DataError` names the file, the line and the field.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from udcg_ltr.data.contexts import ContextRun, read_context_runs, write_context_runs
from udcg_ltr.data.jsonl import dumps_json, parse_lines, write_lines
from udcg_ltr.data.schema import (
    DataError,
    QueryRecord,
    get_field,
    get_probability,
    get_str_list,
    records_by_qid,
)
from udcg_ltr.io import atomic_write_json, read_json_dict

PASSAGES_FILE = "passages.jsonl.gz"
CONTEXTS_FILE = "contexts.jsonl.gz"
PROVENANCE_FILE = "provenance.json"


@dataclass(frozen=True)
class PassageValues:
    """One question's single-passage annotations, aligned with ``pids``."""

    qid: str
    pids: list[str]
    p_no_response: list[float]
    answer_alone: list[str]


def passage_values(record: QueryRecord, llm: str) -> PassageValues:
    """The compact values of ``record``'s pool under ``annotations[llm]``."""
    anns = [p.annotations[llm] for p in record.passages]
    return PassageValues(record.qid, [p.pid for p in record.passages], [float(a["p_no_response"]) for a in anns],
                         [str(a.get("answer_alone", "")) for a in anns])


def _values_line(values: PassageValues) -> str:
    return dumps_json({"qid": values.qid, "pids": values.pids, "p_no_response": values.p_no_response,
                       "answer_alone": values.answer_alone}, values.qid)


def _parse_values(obj: Any) -> PassageValues:
    if not isinstance(obj, Mapping):
        raise DataError(f"expected a JSON object, got {type(obj).__name__}")
    pids = get_str_list(obj, "pids")
    probs = get_field(obj, "p_no_response", list)
    answers = get_str_list(obj, "answer_alone")
    if not len(pids) == len(probs) == len(answers):
        raise DataError(f"{len(pids)} pids, {len(probs)} p_no_response and {len(answers)} answer_alone values",
                        field="p_no_response")
    values = [get_probability({"p_no_response": p}, "p_no_response", f"p_no_response[{i}]")
              for i, p in enumerate(probs)]
    return PassageValues(str(get_field(obj, "qid", str)), pids, values, answers)


def write_cell(folder: str | os.PathLike, llm: str, records: Sequence[QueryRecord], runs: Sequence[ContextRun],
               provenance: Mapping[str, Any]) -> Path:
    """Write ``records``' ``annotations[llm]`` and the context ``runs`` (answers, no grades) compactly."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_lines(folder / PASSAGES_FILE, (_values_line(passage_values(r, llm)) for r in records))
    bare = [ContextRun(r.qid, r.context_id, list(r.pids), r.answer, llm, r.p_no_response) for r in runs]
    write_context_runs(folder / CONTEXTS_FILE, bare)
    atomic_write_json(folder / PROVENANCE_FILE, dict(provenance))  # last: a cell with provenance is whole
    return folder


def read_provenance(folder: str | os.PathLike) -> dict[str, Any]:
    path = Path(folder) / PROVENANCE_FILE
    if (meta := read_json_dict(path)) is None or "llm" not in meta:
        raise DataError("missing or unreadable (an unfinished cell?)", path=str(path), field="llm")
    return meta


def cell_qids(folder: str | os.PathLike) -> list[str]:
    """The question ids of a cell, in file order (its passage values checked, the shared texts not read)."""
    path = Path(folder) / PASSAGES_FILE
    return [v.qid for v in parse_lines(path, _parse_values, unique=lambda v: v.qid)]


def _attach(record: QueryRecord, values: PassageValues, llm: str) -> None:
    by_pid = {p.pid: p for p in record.passages}
    for pid, prob, answer in zip(values.pids, values.p_no_response, values.answer_alone):
        if (passage := by_pid.get(pid)) is None:
            raise DataError(f"query {record.qid!r} has no passage {pid!r} in the shared data", field="pids")
        passage.annotations[llm] = {"p_no_response": prob, "answer_alone": answer}


def _join_values(path: Path, by_qid: Mapping[str, QueryRecord], llm: str) -> list[QueryRecord]:
    joined = []
    for lineno, values in enumerate(parse_lines(path, _parse_values, unique=lambda v: v.qid), start=1):
        if (record := by_qid.get(values.qid)) is None:
            raise DataError(f"unknown question {values.qid!r} (not in the shared data)", path=str(path),
                            line=lineno, field="qid")
        try:
            _attach(record, values, llm)
        except DataError as err:
            raise err.located(path=path, line=lineno) from None
        joined.append(record)
    return joined


def read_cell(folder: str | os.PathLike, records: Sequence[QueryRecord] | Mapping[str, QueryRecord]
              ) -> tuple[list[QueryRecord], list[ContextRun], dict[str, Any]]:
    """Join a cell to ``records`` (the shared texts, annotated in place under the cell's LLM name): the
    cell's records (pool restricted to its pids), its ungraded context runs and its provenance."""
    folder = Path(folder)
    provenance = read_provenance(folder)
    llm = str(provenance["llm"])
    joined = _join_values(folder / PASSAGES_FILE, records_by_qid(records), llm)
    for record in joined:
        record.passages = [p for p in record.passages if llm in p.annotations]
    runs = read_context_runs(folder / CONTEXTS_FILE, llm=llm)
    known = {r.qid for r in joined}
    if stray := next((r for r in runs if r.qid not in known), None):
        raise DataError(f"context of question {stray.qid!r}, which has no passage values",
                        path=str(folder / CONTEXTS_FILE), field="qid")
    return joined, runs, provenance


def read_cell_records(folder: str | os.PathLike, base: Sequence[QueryRecord], *, val_articles: float = 0.0,
                      seed: int = 0) -> list[QueryRecord]:
    """A cell's records (:func:`read_cell`) for training: ``val_articles`` of the train split's articles (a seeded
    share, by ``extra["article"]``) become the ``val`` split, so that a cell without one can choose checkpoints
    without touching its test questions (Hydra: a dataset ``reader`` whose ``base`` is another reader)."""
    if not 0.0 <= val_articles < 1.0:
        raise ValueError(f"val_articles must lie in [0, 1), got {val_articles}")
    records = read_cell(folder, base)[0]
    articles = sorted({r.extra.get("article") for r in records if r.split == "train"}, key=str)
    rng = random.Random(seed)
    chosen = set(rng.sample(articles, round(val_articles * len(articles))))
    for r in records:
        if r.split == "train" and r.extra.get("article") in chosen:
            r.split = "val"
    return records
