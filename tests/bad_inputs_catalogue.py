"""A generated catalogue of malformed inputs for every reader, shared by ``tests/test_bad_inputs.py`` and
``bench/bad_inputs.py``.

Each :class:`Case` is one (reader, mutation) pair. Its ``build(folder)`` writes a valid tiny fixture of
the reader's layout into ``folder``, damages it in one way, and returns the call that reads it and
what the error must say (:class:`Expect`: the file, the line where the layout has lines, the field
where the damage is in one). :func:`run_case` classifies the outcome the way a careful user would:

* ``clear``: a :class:`~udcg_ltr.data.schema.DataError` whose message names the file (and the line
  and field that were expected);
* ``unclear``: a ``DataError`` that misses one of them;
* ``traceback``: any other exception (a raw ``UnicodeDecodeError``, ``EOFError``, ``KeyError`` ...);
* ``silent``: no error at all: the damage was read as data.

The catalogue is built programmatically (:func:`build_catalogue`): file-level damage (empty file,
blank lines only, a byte that is not UTF-8, Latin-1 or UTF-16 text, a corrupt / truncated / fake
gzip stream, a missing file, a directory), layout damage (a truncated JSON line, a line that is not
an object, extra data, a duplicate query id, a truncated or empty JSON array, extra or missing TREC
columns ...), and per-field damage generated from each layout's field table (:data:`SPECS`): a wrong
type for every field, ``null`` where null is not allowed, a missing required field, NaN /
Infinity / 1e999 for numbers, negative or unknown grades, out-of-range probabilities.
:func:`cli_cases` adds a few runs of the command-line entry points as subprocesses.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import json
import os
import re
import subprocess
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from udcg_ltr.data.contexts import read_context_runs
from udcg_ltr.data.jsonl import read_records
from udcg_ltr.data.readers import (
    read_annotated_squad,
    read_annotation_meta,
    read_beir,
    read_dl19,
    read_dpr,
    read_hotpotqa,
    read_nq_pool,
    read_squad,
    read_trec_qrels,
    read_trec_run,
    read_udcg_reference,
)
from udcg_ltr.data.schema import DataError
from udcg_ltr.paths import PROJECT_ROOT

# ---- expectations and outcomes ---------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    """What the error must name: ``path`` always; ``line`` and ``field`` when not None."""

    path: Path
    line: int | None = None
    field: str | None = None


@dataclass(frozen=True)
class Case:
    reader: str
    mutation: str
    build: Callable[[Path], tuple[Callable[[], Any], Expect]]
    cli: bool = False

    @property
    def id(self) -> str:
        return f"{self.reader}:{self.mutation}"


@dataclass
class Outcome:
    kind: str  # clear | unclear | traceback | silent
    detail: str = ""
    message: str = ""


def normalise_field(name: str | None) -> str | None:
    """``annotations['m'].p`` and ``annotations.m.p`` name the same field."""
    if name is None:
        return None
    return re.sub(r"\['([^']*)'\]", r".\1", name).replace("..", ".")


def judge_error(err: DataError, expect: Expect) -> Outcome:
    msg = str(err)
    problems = []
    if err.path != str(expect.path) or str(expect.path) not in msg:
        problems.append(f"path {err.path!r} != {str(expect.path)!r}")
    if expect.line is not None and (err.line != expect.line or f"line {expect.line}" not in msg):
        problems.append(f"line {err.line} != {expect.line}")
    if expect.field is not None and (normalise_field(err.field) != normalise_field(expect.field)
                                     or f"field '{err.field}'" not in msg):
        problems.append(f"field {err.field!r} != {expect.field!r}")
    return Outcome("unclear" if problems else "clear", "; ".join(problems), msg)


def run_case(case: Case, folder: Path) -> Outcome:
    """Build the case's files under ``folder`` (which must exist and be empty), run it, classify the outcome."""
    call, expect = case.build(folder)
    try:
        result = call()
    except DataError as err:
        return judge_error(err, expect)
    except _CliOutcome as out:
        return out.outcome
    except Exception as err:  # a raw exception is exactly what the catalogue hunts for
        return Outcome("traceback", f"{type(err).__name__}: {err}"[:300], traceback.format_exc(limit=-3))
    return Outcome("silent", f"returned {type(result).__name__} of length {_len(result)}")


def _len(obj: Any) -> Any:
    try:
        return len(obj)
    except TypeError:
        return "?"


# ---- writing fixtures ------------------------------------------------------------------------

_OVERFLOW = "__OVERFLOW_1e999__"  # json.dumps cannot write 1e999 (it writes Infinity): a placeholder


def dumps(obj: Any) -> str:
    """JSON text; NaN / Infinity as Python writes them; the placeholder as the literal ``1e999``."""
    return json.dumps(obj, ensure_ascii=False).replace(f'"{_OVERFLOW}"', "1e999")


def jsonl_bytes(objs: Sequence[Any]) -> bytes:
    return "".join(dumps(o) + "\n" for o in objs).encode("utf-8")


def array_bytes(objs: Sequence[Any]) -> bytes:
    """One element a line after the opening bracket: element ``i`` starts on line ``i + 2``."""
    return ("[\n" + ",\n".join(dumps(o) for o in objs) + "\n]\n").encode("utf-8")


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
    return path


def _line_start(data: bytes, line: int) -> int:
    pos = 0
    for _ in range(line - 1):
        pos = data.index(b"\n", pos) + 1
    return pos


def _break_utf8(data: bytes, line: int) -> bytes:
    """A 0xff byte inside the first string of ``line`` (never valid in UTF-8)."""
    start = _line_start(data, line)
    quote = data.index(b'"', start) + 1
    return data[:quote] + b"\xff" + data[quote:]


def _latin1(data: bytes, line: int) -> bytes:
    """An 'é' written in Latin-1 (0xe9 then ASCII: an invalid UTF-8 sequence) inside ``line``."""
    start = _line_start(data, line)
    quote = data.index(b'"', start) + 1
    return data[:quote] + "é".encode("latin-1") + data[quote:]


# ---- the field tables --------------------------------------------------------------------------

@dataclass(frozen=True)
class F:
    """One field of a layout: its path inside the damaged object, its kind, whether it is required and
    whether ``null`` is accepted for it (an optional field usually accepts null as "absent")."""

    path: tuple
    kind: str
    required: bool = False
    nullable: bool = True
    blank_is_error: bool = False  # ids: "" is an error

    @property
    def name(self) -> str:
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
        return out


_NAN, _INF = float("nan"), float("inf")

#: Damaged values per kind: (mutation name, value, suffix of the field the error names).
KIND_MUTATIONS: dict[str, list[tuple[str, Any, str]]] = {
    "str": [("number", 5, ""), ("list", ["x"], ""), ("bool", True, ""), ("object", {"a": "b"}, "")],
    "id": [("float", 1.5, ""), ("list", ["x"], ""), ("bool", True, ""), ("object", {}, "")],
    "strict_id": [("number", 7, ""), ("list", ["x"], ""), ("bool", False, "")],
    "int": [("string", "3", ""), ("float", 1.5, ""), ("bool", True, ""), ("list", [1], "")],
    "rank": [("string", "3", ""), ("float", 1.5, ""), ("bool", True, ""), ("zero", 0, ""), ("negative", -2, "")],
    "number": [("string", "high", ""), ("bool", True, ""), ("list", [1.0], ""), ("NaN", _NAN, ""),
               ("Infinity", _INF, ""), ("-Infinity", -_INF, ""), ("1e999", _OVERFLOW, "")],
    "number_or_str": [("bool", True, ""), ("list", [1.0], ""), ("NaN", _NAN, ""), ("Infinity", _INF, ""),
                      ("1e999", _OVERFLOW, "")],
    "grade": [("negative", -1, ""), ("above 5", 6, ""), ("float", 2.5, ""), ("string", "1", ""), ("bool", True, "")],
    "bool": [("int", 1, ""), ("string", "true", ""), ("list", [True], "")],
    "list_str": [("string", "yes", ""), ("object", {"a": "b"}, ""), ("number element", [1], "[0]"),
                 ("null element", [None], "[0]"), ("NaN element", [_NAN], "[0]")],
    "list": [("string", "x", ""), ("object", {}, ""), ("number", 5, "")],
    "dict": [("list", [], ""), ("string", "x", ""), ("number", 5, "")],
    "prob": [("above 1", 1.5, ""), ("below 0", -0.1, ""), ("NaN", _NAN, ""), ("Infinity", _INF, ""),
             ("string", "0.5", ""), ("bool", True, "")],
}

_DELETE = object()


def _set(obj: Any, path: tuple, value: Any) -> Any:
    """A deep copy of ``obj`` with ``path`` set to ``value`` (or deleted)."""
    obj = json.loads(json.dumps(obj))
    target = obj
    for part in path[:-1]:
        target = target[part]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return obj


def field_mutations(spec: Sequence[F]) -> list[tuple[str, tuple, Any, str]]:
    """``(mutation name, path, value, error field)`` for every field of a layout's table."""
    out = []
    for f in spec:
        for name, value, suffix in KIND_MUTATIONS[f.kind]:
            out.append((f"{f.name} {name}", f.path, value, f.name + suffix))
        if not f.nullable or f.required:
            out.append((f"{f.name} null", f.path, None, f.name))
        if f.required:
            out.append((f"{f.name} missing", f.path, _DELETE, f.name))
        if f.blank_is_error:
            out.append((f"{f.name} blank", f.path, "", f.name))
    return out


# ---- layouts: valid tiny fixtures and field tables ------------------------------------------

def record_obj(i: int) -> dict:
    return {"qid": f"q{i}", "question": f"Who wrote report {i}?", "answers": [f"author {i}"], "split": "test",
            "passages": [{"pid": f"q{i}-p0", "title": "T", "text": f"author {i} wrote it", "rank": 1, "score": 2.0,
                          "relevance": 1, "is_distractor": False, "annotations": {"m": {"p_no_response": 0.25}},
                          "extra": {}},
                         {"pid": f"q{i}-p1", "title": "T", "text": "something else", "rank": 2, "score": 1.0,
                          "relevance": 0, "is_distractor": True, "annotations": {"m": {"p_no_response": 0.75}},
                          "extra": {}}],
            "extra": {}}


RECORD_SPEC = [
    F(("qid",), "strict_id", required=True, blank_is_error=True), F(("question",), "str", required=True),
    F(("answers",), "list_str", nullable=False), F(("split",), "str"), F(("extra",), "dict", nullable=False),
    F(("passages",), "list", required=True),
    F(("passages", 0, "pid"), "strict_id", required=True, blank_is_error=True),
    F(("passages", 0, "text"), "str", required=True), F(("passages", 0, "title"), "str", nullable=False),
    F(("passages", 0, "rank"), "rank"), F(("passages", 0, "score"), "number"),
    F(("passages", 0, "relevance"), "grade"), F(("passages", 0, "is_distractor"), "bool"),
    F(("passages", 0, "annotations"), "dict", nullable=False),
    F(("passages", 0, "annotations", "m", "p_no_response"), "prob", nullable=False),
    F(("passages", 0, "extra"), "dict", nullable=False),
]


def context_obj(i: int) -> dict:
    return {"qid": f"q{i}", "context_id": i, "pids": [f"q{i}-p0", f"q{i}-p1"], "answer": f"author {i}",
            "p_no_response": 0.5, "outcome": "correct", "llm": "m", "extra": {}}


CONTEXT_SPEC = [
    F(("qid",), "id", required=True), F(("context_id",), "int", required=True),
    F(("pids",), "list_str", required=True), F(("answer",), "str", required=True),
    F(("p_no_response",), "prob"), F(("outcome",), "str"), F(("llm",), "str"), F(("extra",), "dict"),
]


def annotated_obj(i: int) -> dict:
    return {"qid": f"q{i}", "question": f"Who wrote report {i}?", "answers": [f"author {i}"], "article": 4,
            "split": "test",
            "passages": [{"pid": f"{i}-0-0", "title": "T", "text": f"author {i} wrote it", "rank": 1,
                          "retrieval_score": 0.7, "has_answer": True, "same_article": True, "p_no_response": 0.2,
                          "answer_alone": f"author {i}"},
                         {"pid": f"{i}-0-1", "title": "T", "text": "something else", "rank": 2,
                          "retrieval_score": 0.5, "has_answer": False, "same_article": False, "p_no_response": 0.9,
                          "answer_alone": "NO-RESPONSE"}]}


ANNOTATED_SPEC = [
    F(("qid",), "id", required=True, blank_is_error=True), F(("question",), "str", required=True),
    F(("answers",), "list_str", required=True), F(("article",), "int"), F(("split",), "str"),
    F(("passages",), "list", required=True),
    F(("passages", 0, "pid"), "id", required=True, blank_is_error=True),
    F(("passages", 0, "text"), "str", required=True), F(("passages", 0, "title"), "str"),
    F(("passages", 0, "rank"), "rank"), F(("passages", 0, "retrieval_score"), "number"),
    F(("passages", 0, "has_answer"), "bool", required=True), F(("passages", 0, "same_article"), "bool"),
    F(("passages", 0, "p_no_response"), "prob", required=True), F(("passages", 0, "answer_alone"), "str"),
]


def reference_obj(i: int) -> dict:
    return {"example_id": f"e{i}", "question": f"Who wrote report {i}?",
            "passages": [{"doc_id": f"d{i}0", "text": f"author {i} wrote it", "is_relevant": True,
                          "models_info": {"m": {"no_res_prob": 0.1}}},
                         {"doc_id": f"d{i}1", "text": "something else", "is_relevant": False,
                          "models_info": {"m": {"no_res_prob": 0.8}}}],
            "udcg": {"m": 0.6}}


REFERENCE_SPEC = [
    F(("example_id",), "id", required=True, blank_is_error=True), F(("question",), "str", required=True),
    F(("passages",), "list", required=True),
    F(("passages", 0, "doc_id"), "id", required=True, blank_is_error=True),
    F(("passages", 0, "text"), "str", required=True), F(("passages", 0, "is_relevant"), "bool", required=True),
    F(("passages", 0, "models_info"), "dict"),
    F(("passages", 0, "models_info", "m", "no_res_prob"), "prob", required=True),
    F(("udcg",), "dict"), F(("udcg", "m"), "prob", nullable=False),
]


def dpr_obj(i: int) -> dict:
    return {"id": f"n{i}", "question": f"who wrote report {i}", "answers": [f"author {i}"],
            "ctxs": [{"id": f"c{i}0", "title": "T", "text": f"author {i} wrote report {i}", "hasanswer": True,
                      "isgold": True, "score": "12.5"},
                     {"id": f"c{i}1", "title": "T", "text": "something else entirely", "hasanswer": False,
                      "score": 3.5}]}


DPR_SPEC = [
    F(("id",), "id", nullable=False, blank_is_error=True), F(("question",), "str", required=True),
    F(("answers",), "list_str", required=True), F(("ctxs",), "list", required=True),
    F(("ctxs", 0, "id"), "id", blank_is_error=True), F(("ctxs", 0, "text"), "str", required=True),
    F(("ctxs", 0, "title"), "str"), F(("ctxs", 0, "hasanswer"), "bool"), F(("ctxs", 0, "isgold"), "bool"),
    F(("ctxs", 1, "score"), "number"),
]


def hotpot_obj(i: int) -> dict:
    return {"question_id": f"h{i}", "question_text": f"Who wrote report {i}?",
            "answers_objects": [{"spans": [f"author {i}"], "number": ""}],
            "contexts": [{"id": 0, "title": "T", "paragraph_text": f"author {i} wrote it", "is_supporting": True},
                         {"id": 1, "title": "U", "paragraph_text": "something else", "is_supporting": False}]}


HOTPOT_SPEC = [
    F(("question_id",), "id", required=True, blank_is_error=True), F(("question_text",), "str", required=True),
    F(("answers_objects",), "list", required=True), F(("answers_objects", 0, "spans"), "list_str"),
    F(("answers_objects", 0, "number"), "number_or_str"),
    F(("contexts",), "list", required=True), F(("contexts", 0, "id"), "id"),
    F(("contexts", 0, "paragraph_text"), "str", required=True), F(("contexts", 0, "title"), "str"),
    F(("contexts", 0, "is_supporting"), "bool", required=True),
]


def dl19_obj(i: int) -> dict:
    return {"query": f"query {i}", "hits": [{"content": f"text {i} {j}", "qid": i, "docid": f"d{j}",
                                             "rank": j + 1, "score": 10.0 - j} for j in range(3)]}


DL19_SPEC = [
    F(("query",), "str", required=True), F(("hits",), "list", required=True),
    F(("hits", 1, "qid"), "id", required=True), F(("hits", 1, "docid"), "id", required=True),
    F(("hits", 1, "content"), "str", required=True), F(("hits", 1, "rank"), "rank", required=True),
    F(("hits", 1, "score"), "number", required=True),
]

DL19_QRELS = b"0 Q0 d0 3\n0 Q0 d2 1\n1 Q0 d0 2\n1 Q0 d1 0\n"


def squad_obj() -> dict:
    def article(a: int) -> dict:
        return {"title": f"Article_{a}", "paragraphs": [
            {"context": f"Report {a} was written by author {a}. It has many pages.",
             "qas": [{"id": f"s{a}0", "question": f"Who wrote report {a}?",
                      "answers": [{"text": f"author {a}", "answer_start": 20}]}]},
            {"context": "Another paragraph about something else.", "qas": []}]}
    return {"version": "1.1", "data": [article(0), article(1)]}


SQUAD_SPEC = [
    F(("data",), "list", required=True), F(("data", 1, "title"), "str", required=True),
    F(("data", 1, "paragraphs"), "list", required=True),
    F(("data", 1, "paragraphs", 0, "context"), "str", required=True),
    F(("data", 1, "paragraphs", 0, "qas"), "list", required=True),
    F(("data", 1, "paragraphs", 0, "qas", 0, "id"), "id", required=True),
    F(("data", 1, "paragraphs", 0, "qas", 0, "question"), "str", required=True),
    F(("data", 1, "paragraphs", 0, "qas", 0, "answers"), "list", required=True),
    F(("data", 1, "paragraphs", 0, "qas", 0, "answers", 0, "text"), "str", required=True),
]


def meta_obj() -> dict:
    return {"llm": "demo", "system_prompt": "Answer from the documents or say NO-RESPONSE.",
            "user_template": "Documents:\n{documents}\n\nQuestion:\n{question}\n\nAnswer:",
            "document_template": "Document [{i}] (Title: {title}) {text}", "document_separator": "\n\n",
            "no_response_token": "NO", "retrieval_pool": 10}


META_SPEC = [F((key,), "str", required=True) for key in
             ("system_prompt", "user_template", "document_template", "document_separator", "no_response_token")]

BEIR_CORPUS = [{"_id": "d1", "title": "Alpha", "text": "alpha text"}, {"_id": "d2", "title": "", "text": "beta text"},
               {"_id": "d3", "title": "Gamma", "text": "gamma text", "metadata": {}}]
BEIR_QUERIES = [{"_id": "q1", "text": "alpha?"}, {"_id": "q2", "text": "gamma?"}]
BEIR_QRELS = b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\td3\t2\n"
BEIR_DOC_SPEC = [F(("_id",), "id", required=True), F(("text",), "str", required=True), F(("title",), "str")]
BEIR_QUERY_SPEC = [F(("_id",), "id", required=True), F(("text",), "str", required=True)]

TREC_RUN = b"q1 Q0 d1 1 2.5 run\nq1 Q0 d2 2 1.5 run\nq2 Q0 d1 1 0.5 run\n"
TREC_QRELS = b"q1 0 d1 1\nq1 0 d2 0\nq2 0 d1 2\n"


# ---- file layouts: how to write a fixture, read it, and where line 2 / element 1 is ------------

@dataclass(frozen=True)
class Layout:
    """A reader and its file: ``write(folder, data_bytes, name) -> (call, path)``."""

    reader: str
    kind: str                  # jsonl | array | object | text
    name: str                  # file name of the damaged file (".gz" variants add the suffix)
    valid: Callable[[], bytes]  # the valid content of the damaged file
    read: Callable[[Path, Path], Any]  # (folder, damaged file path) -> result
    setup: Callable[[Path], None] = lambda folder: None  # companion files (valid)
    objects: Callable[[], list] | None = None  # jsonl / array: the valid objects
    spec: Sequence[F] = ()
    unique_field: str | None = None   # the id field a duplicate is reported under
    damaged: int = 1                  # index of the object the field mutations damage
    field_prefix: Callable[[int], str] = lambda i: ""  # e.g. "[1]" for JSON arrays
    extra: list = field(default_factory=list)  # reader-specific mutations: (name, bytes builder, line, field)

    def line_of(self, index: int) -> int | None:
        if self.kind == "jsonl":
            return index + 1
        if self.kind == "array":
            return index + 2
        return None


def _beir_setup(skip: str):
    def setup(folder: Path) -> None:
        if skip != "corpus":
            write(folder / "corpus.jsonl", jsonl_bytes(BEIR_CORPUS))
        if skip != "queries":
            write(folder / "queries.jsonl", jsonl_bytes(BEIR_QUERIES))
        if skip != "qrels":
            write(folder / "qrels" / "test.tsv", BEIR_QRELS)
    return setup


def _dl19_setup(folder: Path) -> None:
    write(folder / "qrels.txt", DL19_QRELS)


def _dl19_results_setup(folder: Path) -> None:
    write(folder / "results.json", array_bytes([dl19_obj(0), dl19_obj(1)]))


def layouts() -> list[Layout]:
    recs = [record_obj(0), record_obj(1)]
    ctxs = [context_obj(0), context_obj(1)]
    ann = [annotated_obj(0), annotated_obj(1)]
    ref = [reference_obj(0), reference_obj(1)]
    dpr = [dpr_obj(0), dpr_obj(1), dpr_obj(2)]
    hot = [hotpot_obj(0), hotpot_obj(1)]
    dl19 = [dl19_obj(0), dl19_obj(1)]
    return [
        Layout("read_records", "jsonl", "records.jsonl", lambda: jsonl_bytes(recs), lambda d, p: read_records(p),
               objects=lambda: recs, spec=RECORD_SPEC, unique_field="qid"),
        Layout("read_context_runs", "jsonl", "runs.jsonl", lambda: jsonl_bytes(ctxs),
               lambda d, p: read_context_runs(p, llm="m"), objects=lambda: ctxs, spec=CONTEXT_SPEC,
               unique_field="context_id"),
        Layout("read_annotated_squad", "jsonl", "squad_top10.jsonl", lambda: jsonl_bytes(ann),
               lambda d, p: read_annotated_squad(p), objects=lambda: ann, spec=ANNOTATED_SPEC, unique_field="qid"),
        Layout("read_annotation_meta", "object", "meta.json", lambda: dumps(meta_obj()).encode(),
               lambda d, p: read_annotation_meta(p), objects=lambda: [meta_obj()], spec=META_SPEC, damaged=0),
        Layout("read_udcg_reference", "array", "reference.json", lambda: array_bytes(ref),
               lambda d, p: read_udcg_reference(p), objects=lambda: ref, spec=REFERENCE_SPEC,
               unique_field="example_id", field_prefix=lambda i: f"[{i}]"),
        Layout("read_dpr", "jsonl", "nq.jsonl", lambda: jsonl_bytes(dpr), lambda d, p: read_dpr(p),
               objects=lambda: dpr, spec=DPR_SPEC, unique_field="id"),
        Layout("read_nq_pool", "jsonl", "nq.jsonl", lambda: jsonl_bytes(dpr),
               lambda d, p: read_nq_pool(p, pool_size=2), objects=lambda: dpr, spec=DPR_SPEC[:4],
               unique_field="id"),
        Layout("read_squad", "object", "squad.json", lambda: dumps(squad_obj()).encode(),
               lambda d, p: read_squad(p, split_ratios={"train": 1, "test": 1}), objects=lambda: [squad_obj()],
               spec=SQUAD_SPEC, damaged=0),
        Layout("read_hotpotqa", "jsonl", "hotpot.jsonl", lambda: jsonl_bytes(hot), lambda d, p: read_hotpotqa(p),
               objects=lambda: hot, spec=HOTPOT_SPEC, unique_field="question_id"),
        Layout("read_trec_run", "text", "run.txt", lambda: TREC_RUN, lambda d, p: read_trec_run(p)),
        Layout("read_trec_qrels", "text", "qrels.txt", lambda: TREC_QRELS, lambda d, p: read_trec_qrels(p)),
        Layout("read_dl19", "array", "results.json", lambda: array_bytes(dl19),
               lambda d, p: read_dl19(p, d / "qrels.txt"), setup=_dl19_setup, objects=lambda: dl19,
               spec=DL19_SPEC, unique_field="hits[0].qid", field_prefix=lambda i: f"[{i}]"),
        Layout("read_dl19.qrels", "text", "qrels.txt", lambda: DL19_QRELS,
               lambda d, p: read_dl19(d / "results.json", p), setup=_dl19_results_setup),
        Layout("read_beir.corpus", "jsonl", "corpus.jsonl", lambda: jsonl_bytes(BEIR_CORPUS),
               lambda d, p: read_beir(d), setup=_beir_setup("corpus"), objects=lambda: BEIR_CORPUS,
               spec=BEIR_DOC_SPEC, unique_field="_id"),
        Layout("read_beir.queries", "jsonl", "queries.jsonl", lambda: jsonl_bytes(BEIR_QUERIES),
               lambda d, p: read_beir(d), setup=_beir_setup("queries"), objects=lambda: BEIR_QUERIES,
               spec=BEIR_QUERY_SPEC, unique_field="_id"),
        Layout("read_beir.qrels", "text", "qrels/test.tsv", lambda: BEIR_QRELS, lambda d, p: read_beir(d),
               setup=_beir_setup("qrels")),
    ]


# ---- case builders ---------------------------------------------------------------------------

def _case(layout: Layout, mutation: str, data: bytes | None, *, line: int | None = None, fld: str | None = None,
          gz: bool = False, directory: bool = False) -> Case:
    """A case writing ``data`` as the layout's file (``None``: no file; ``directory``: a folder in its place)."""
    def build(folder: Path) -> tuple[Callable[[], Any], Expect]:
        layout.setup(folder)
        path = folder / (layout.name + (".gz" if gz else ""))
        if directory:
            path.mkdir(parents=True)
        elif data is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return (lambda: layout.read(folder, path)), Expect(path, line, fld)
    return Case(layout.reader, mutation, build)


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _corrupt_gzip(data: bytes) -> bytes:
    raw = bytearray(_gz(data))
    middle = 10 + (len(raw) - 18) // 2  # inside the deflate stream (10-byte header, 8-byte trailer)
    for i in range(middle, min(middle + 4, len(raw) - 8)):
        raw[i] ^= 0x5A
    return bytes(raw)


def file_cases(layout: Layout) -> list[Case]:
    """Damage any file can suffer, whatever its layout."""
    valid = layout.valid()
    # the damaged line: the second line / element (line 1 stays valid), or line 1 of a one-object file
    line = 2 if layout.kind in ("jsonl", "text") else (3 if layout.kind == "array" else 1)
    if layout.reader == "read_beir.qrels":
        line = 2  # line 1 is the header
    cases = [
        _case(layout, "empty file", b""),
        _case(layout, "blank lines only", b"\n  \n\n"),
        _case(layout, "non-UTF-8 byte", _break_utf8(valid, line) if b'"' in valid else _insert_text(valid, line),
              line=line),
        _case(layout, "Latin-1 text", _latin1(valid, line) if b'"' in valid else _insert_text(valid, line, "é"),
              line=line),
        _case(layout, "UTF-16 file", valid.decode("utf-8").encode("utf-16"), line=1),
        _case(layout, "missing file", None),
        _case(layout, "directory instead of a file", None, directory=True),
        _case(layout, "corrupt gzip", _corrupt_gzip(valid), gz=True),
        _case(layout, "truncated gzip", _gz(valid)[: len(_gz(valid)) * 2 // 3], gz=True),
        _case(layout, "not gzip data in a .gz file", valid, gz=True),
        _case(layout, "gzipped non-UTF-8 byte",
              _gz(_break_utf8(valid, line) if b'"' in valid else _insert_text(valid, line)), gz=True, line=line),
    ]
    return cases


def _insert_text(data: bytes, line: int, text: str | None = None) -> bytes:
    start = _line_start(data, line)
    bad = b"\xff" if text is None else text.encode("latin-1")
    return data[:start] + bad + data[start:]


def jsonl_cases(layout: Layout) -> list[Case]:
    objs = layout.objects()
    lines = [dumps(o) for o in objs]

    def with_line2(text: str) -> bytes:
        return ("\n".join([lines[0], text] + lines[2:]) + "\n").encode("utf-8")

    cases = [
        _case(layout, "truncated JSON line", with_line2(lines[1][: len(lines[1]) // 2]), line=2),
        _case(layout, "torn last line (no newline)", ("\n".join(lines) + "\n").encode()[:-20], line=len(lines)),
        _case(layout, "line is an array", with_line2("[1, 2]"), line=2),
        _case(layout, "line is a string", with_line2('"text"'), line=2),
        _case(layout, "line is null", with_line2("null"), line=2),
        _case(layout, "extra data after the object", with_line2(lines[1] + " x"), line=2),
        _case(layout, "two objects on one line", with_line2(lines[1] + lines[1]), line=2),
        _case(layout, "bare NaN line", with_line2("NaN"), line=2),
    ]
    if layout.unique_field is not None:
        cases.append(_case(layout, "duplicate query id", with_line2(lines[0]), line=2, fld=layout.unique_field))
    for name, path, value, fld in field_mutations(layout.spec):
        damaged = _set(objs[layout.damaged], path, value)
        data = jsonl_bytes([damaged if i == layout.damaged else o for i, o in enumerate(objs)])
        cases.append(_case(layout, name, data, line=layout.damaged + 1, fld=fld))
    return cases


def array_cases(layout: Layout) -> list[Case]:
    objs = layout.objects()
    valid = layout.valid()
    prefix = layout.field_prefix(layout.damaged)
    cases = [
        _case(layout, "truncated JSON array", valid[: len(valid) * 2 // 3]),
        _case(layout, "object instead of an array", dumps({"data": objs}).encode(), line=1),
        _case(layout, "empty array", b"[]\n"),
        _case(layout, "element is a number", array_bytes([objs[0], 5]), line=3, fld="[1]"),
        _case(layout, "element is null", array_bytes([objs[0], None]), line=3, fld="[1]"),
        _case(layout, "data after the array", valid + b"[]\n"),
        _case(layout, "missing comma", valid.replace(b",\n", b"\n", 1)),
    ]
    if layout.unique_field is not None:
        cases.append(_case(layout, "duplicate query id", array_bytes([objs[0], objs[0]]), line=3,
                           fld=f"[1].{layout.unique_field}"))
    for name, path, value, fld in field_mutations(layout.spec):
        damaged = _set(objs[layout.damaged], path, value)
        data = array_bytes([damaged if i == layout.damaged else o for i, o in enumerate(objs)])
        cases.append(_case(layout, name, data, line=layout.line_of(layout.damaged), fld=f"{prefix}.{fld}"))
    return cases


def object_cases(layout: Layout) -> list[Case]:
    obj = layout.objects()[0]
    valid = layout.valid()
    cases = [
        _case(layout, "truncated JSON", valid[: len(valid) // 2]),
        _case(layout, "array instead of an object", b"[" + valid + b"]"),
        _case(layout, "empty object", b"{}"),
        _case(layout, "data after the object", valid + b" {}"),
    ]
    for name, path, value, fld in field_mutations(layout.spec):
        cases.append(_case(layout, name, dumps(_set(obj, path, value)).encode(), fld=fld))
    return cases


def text_cases(layout: Layout) -> list[Case]:
    """Line damage for TREC runs / qrels and BEIR qrels: one line replaced, the lines before it valid."""
    lines = layout.valid().decode().splitlines()

    def with_line(n: int, text: str) -> bytes:
        return ("\n".join(lines[: n - 1] + [text] + lines[n:]) + "\n").encode()

    if layout.reader == "read_trec_run":
        rank, score, docid = "column 4 (rank)", "column 5 (score)", "column 3 (docid)"
        damage = [
            ("extra column", "q1 Q0 d2 2 1.5 run extra", None), ("missing column", "q1 Q0 d2 2 1.5", None),
            ("comma separated", "q1,Q0,d2,2,1.5,run", None),
            ("non-numeric score", "q1 Q0 d2 2 high run", score), ("NaN score", "q1 Q0 d2 2 nan run", score),
            ("inf score", "q1 Q0 d2 2 inf run", score), ("-inf score", "q1 Q0 d2 2 -inf run", score),
            ("1e999 score", "q1 Q0 d2 2 1e999 run", score),
            ("non-integer rank", "q1 Q0 d2 second 1.5 run", rank), ("float rank", "q1 Q0 d2 2.5 1.5 run", rank),
            ("document listed twice", "q1 Q0 d1 2 1.5 run", docid),
        ]
        at = 2
    elif layout.reader == "read_beir.qrels":
        grade, corpus, query = "column 3 (score)", "column 2 (corpus-id)", "column 1 (query-id)"
        damage = [  # line 1 is the header, line 2 judges (q1, d1): line 3 is damaged
            ("extra column", "q1\td2\t0\textra", None), ("missing column", "q1\td2", None),
            ("space separated", "q1 d2 0", None),
            ("non-integer grade", "q1\td2\thigh", grade), ("inf grade", "q1\td2\tinf", grade),
            ("NaN grade", "q1\td2\tnan", grade), ("fractional grade", "q1\td2\t0.5", grade),
            ("negative grade", "q1\td2\t-1", grade), ("grade above 5", "q1\td2\t7", grade),
            ("empty query id", "\td2\t1", query), ("empty corpus id", "q1\t\t1", corpus),
            ("pair judged twice", "q1\td1\t1", corpus), ("pair judged twice, other grade", "q1\td1\t0", corpus),
        ]
        at = 3
    else:  # TREC qrels; the DL19 copy also bounds grades to the data model's 0..5
        q, it, rel, docid = ("0", "Q0", "column 4 (rel)", "column 3 (docid)") if layout.reader == "read_dl19.qrels" \
            else ("q1", "0", "column 4 (rel)", "column 3 (docid)")
        first = lines[0].split()
        damage = [
            ("extra column", f"{q} {it} d2 0 extra", None), ("missing column", f"{q} {it} d2", None),
            ("non-integer grade", f"{q} {it} d2 relevant", rel), ("inf grade", f"{q} {it} d2 inf", rel),
            ("NaN grade", f"{q} {it} d2 nan", rel), ("fractional grade", f"{q} {it} d2 1.5", rel),
            ("pair judged twice", lines[0], docid),
            ("pair judged twice, other grade", f"{first[0]} {first[1]} {first[2]} {int(first[3]) - 1}", docid),
        ]
        if layout.reader == "read_dl19.qrels":
            damage += [("negative grade", f"{q} {it} d2 -1", rel), ("grade above 5", f"{q} {it} d2 7", rel)]
        at = 2
    cases = [_case(layout, name, with_line(at, text), line=at, fld=fld) for name, text, fld in damage]
    if layout.reader == "read_beir.qrels":
        cases.append(_case(layout, "header only", b"query-id\tcorpus-id\tscore\n"))
    return cases


def build_catalogue() -> list[Case]:
    """Every (reader, mutation) case, in a fixed order."""
    cases: list[Case] = []
    for layout in layouts():
        cases += file_cases(layout)
        cases += {"jsonl": jsonl_cases, "array": array_cases, "object": object_cases, "text": text_cases}[
            layout.kind](layout)
    cases += semantic_cases()
    return cases


# ---- damage that needs a layout's meaning ----------------------------------------------------

def semantic_cases() -> list[Case]:
    """Errors of meaning rather than type: duplicate passage ids, empty pools, unknown outcomes ..."""
    by_name = {lay.reader: lay for lay in layouts()}
    out: list[Case] = []

    def jsonl_obj(reader: str, name: str, damaged: dict, fld: str) -> None:
        lay = by_name[reader]
        objs = lay.objects()
        out.append(_case(lay, name, jsonl_bytes([objs[0], damaged] + objs[2:]), line=2, fld=fld))

    rec = record_obj(1)
    jsonl_obj("read_records", "duplicate passage id", _set(rec, ("passages", 1, "pid"), "q1-p0"), "passages[1].pid")
    jsonl_obj("read_records", "empty candidate list", _set(rec, ("passages",), []), "passages")
    jsonl_obj("read_records", "unknown key", _set(rec, ("colour",), "red"), "(record)")
    jsonl_obj("read_records", "unknown passage key", _set(rec, ("passages", 0, "colour"), "red"), "passages[0]")
    jsonl_obj("read_records", "annotation is not an object", _set(rec, ("passages", 0, "annotations", "m"), 0.5),
              "passages[0].annotations['m']")
    jsonl_obj("read_records", "NaN deep in extra", _set(rec, ("extra",), {"a": [1, _NAN]}), "extra.a[1]")
    jsonl_obj("read_records", "huge integer score", _set(rec, ("passages", 0, "score"), 10 ** 400),
              "passages[0].score")
    jsonl_obj("read_context_runs", "unknown outcome", _set(context_obj(1), ("outcome",), "maybe"), "outcome")
    jsonl_obj("read_annotated_squad", "duplicate passage id",
              _set(annotated_obj(1), ("passages", 1, "pid"), "1-0-0"), "passages[1].pid")
    jsonl_obj("read_annotated_squad", "rank 0", _set(annotated_obj(1), ("passages", 1, "rank"), 0), "passages[1].rank")
    jsonl_obj("read_annotated_squad", "empty candidate list", _set(annotated_obj(1), ("passages",), []), "passages")
    jsonl_obj("read_dpr", "score string that is not a number", _set(dpr_obj(1), ("ctxs", 0, "score"), "twelve"),
              "ctxs[0].score")
    jsonl_obj("read_dpr", "score string nan", _set(dpr_obj(1), ("ctxs", 0, "score"), "nan"), "ctxs[0].score")
    jsonl_obj("read_dpr", "duplicate passage id", _set(dpr_obj(1), ("ctxs", 1, "id"), "c10"), "ctxs[1].id")
    jsonl_obj("read_dpr", "qid null", _set(_set(dpr_obj(1), ("id",), _DELETE), ("qid",), None), "qid")
    jsonl_obj("read_hotpotqa", "no answer span", _set(hotpot_obj(1), ("answers_objects", 0, "spans"), []),
              "answers_objects")
    jsonl_obj("read_hotpotqa", "duplicate context id", _set(hotpot_obj(1), ("contexts", 1, "id"), 0),
              "contexts[1].id")
    ref = by_name["read_udcg_reference"]
    out.append(_case(ref, "duplicate doc_id", array_bytes([reference_obj(0), _set(reference_obj(1), (
        "passages", 1, "doc_id"), "d10")]), line=3, fld="[1].passages[1].doc_id"))
    out.append(_case(ref, "UDCG outside [0, 1]", array_bytes([reference_obj(0), _set(reference_obj(1), ("udcg", "m"),
                                                                                     2.0)]), line=3, fld="[1].udcg.m"))
    dl = by_name["read_dl19"]
    for name, damaged, fld in [
        ("no hits", _set(dl19_obj(1), ("hits",), []), "[1].hits"),
        ("hits of two queries", _set(dl19_obj(1), ("hits", 1, "qid"), 0), "[1].hits[1].qid"),
        ("duplicate docid", _set(dl19_obj(1), ("hits", 1, "docid"), "d0"), "[1].hits[1].docid"),
    ]:
        out.append(_case(dl, name, array_bytes([dl19_obj(0), damaged]), line=3, fld=fld))
    sq = by_name["read_squad"]
    squad = squad_obj()
    for name, damaged, fld in [
        ("no gold answer", _set(squad, ("data", 1, "paragraphs", 0, "qas", 0, "answers"), []),
         "data[1].paragraphs[0].qas[0].answers"),
        ("duplicate question id", _set(squad, ("data", 1, "paragraphs", 0, "qas", 0, "id"), "s00"),
         "data[1].paragraphs[0].qas[0].id"),
        ("no question at all", _set(_set(squad, ("data", 0, "paragraphs", 0, "qas"), []),
                                    ("data", 1, "paragraphs", 0, "qas"), []), "data"),
        ("data is empty", _set(squad, ("data",), []), "data"),
    ]:
        out.append(_case(sq, name, dumps(damaged).encode(), fld=fld))
    beir_corpus = by_name["read_beir.corpus"]
    out.append(_case(beir_corpus, "document of the qrels not in the corpus", jsonl_bytes(BEIR_CORPUS[:2])))
    return out


# ---- the command-line entry points -------------------------------------------------------------

class _CliOutcome(Exception):
    def __init__(self, outcome: Outcome):
        super().__init__(outcome.kind)
        self.outcome = outcome


def _cli(argv: list[str], expect_in_stderr: list[str | tuple[str, ...]], folder: Path) -> Outcome:
    """Run an entry point; ``expect_in_stderr``: texts stderr must hold (a tuple: any one of them)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline",
           "WANDB_SILENT": "true", "HYDRA_FULL_ERROR": "0"}
    proc = subprocess.run([sys.executable, *argv, f"hydra.run.dir={folder / 'hydra'}"], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode == 0:
        return Outcome("silent", "exit code 0", proc.stdout[-500:])
    missing = [s for s in expect_in_stderr
               if not any(alt in proc.stderr for alt in (s if isinstance(s, tuple) else (s,)))]
    if missing:
        return Outcome("traceback" if "Traceback" in proc.stderr else "unclear",
                       f"exit code {proc.returncode}; stderr lacks {missing}", proc.stderr[-2000:])
    note = " (the entry point also printed a Python traceback)" if "Traceback" in proc.stderr else ""
    return Outcome("clear", f"exit code {proc.returncode}{note}", proc.stderr[-2000:])


def cli_cases() -> list[Case]:
    """A few bad inputs through ``python -m udcg_ltr.annotate`` and ``evaluate.py`` (subprocesses)."""
    def annotate_bad_bytes(folder: Path):
        path = write(folder / "in.jsonl", _break_utf8(jsonl_bytes([record_obj(0), record_obj(1)]), 2))
        argv = ["-m", "udcg_ltr.annotate", f"input={path}", f"output={folder / 'out.jsonl'}", "llm=smollm2",
                f"paths.annotation_cache_dir={folder / 'cache'}"]
        return (lambda: _raise_cli(_cli(argv, [str(path), "line 2", "UTF-8"], folder))), Expect(path, 2)

    def evaluate_duplicate(folder: Path):
        path = write(folder / "dup.jsonl", jsonl_bytes([record_obj(0), record_obj(0)]))
        argv = ["evaluate.py", "mode=metrics", "dataset=jsonl", f"dataset.reader.path={path}", "logger=none"]
        return (lambda: _raise_cli(_cli(argv, [str(path), "line 2", "duplicate qid"], folder))), Expect(path, 2)

    def evaluate_missing(folder: Path):
        path = folder / "absent.jsonl"
        argv = ["evaluate.py", "mode=metrics", "dataset=jsonl", f"dataset.reader.path={path}", "logger=none"]
        # the job's config check may catch it before the reader does: either message names the path
        return (lambda: _raise_cli(_cli(argv, [str(path), ("no such file", "does not exist")], folder))), Expect(path)

    return [Case("cli:annotate", "non-UTF-8 byte in input", annotate_bad_bytes, cli=True),
            Case("cli:evaluate", "duplicate query id", evaluate_duplicate, cli=True),
            Case("cli:evaluate", "missing data file", evaluate_missing, cli=True)]


def _raise_cli(outcome: Outcome) -> None:
    raise _CliOutcome(outcome)


def valid_fixture_reads(folder: Path) -> dict[str, int]:
    """Sanity check of the catalogue itself: every layout's undamaged fixture reads, and how many items."""
    counts = {}
    for i, layout in enumerate(layouts()):
        sub = folder / f"{i}"
        sub.mkdir(parents=True)
        layout.setup(sub)
        path = write(sub / layout.name, layout.valid())
        counts[layout.reader] = _len(layout.read(sub, path))
    return counts


# ---- generated mutations: hypothesis strategies and an oracle ------------------------------------
#
# Each generated input is a valid fixture of one layout, mutated one way: a byte flipped to a non-ASCII
# byte (the fixtures are ASCII, so the file is no longer UTF-8), a truncation inside a line or value, a key
# given twice (a line given twice in a text layout), a type swap or an extreme number from the layout's field
# table, a lone surrogate in a string, a BOM, CRLF line ends, extra white space, a negative or huge cutoff.
# The oracle (:func:`judge_generated`): the read raises a DataError naming the file (or the ``top_k`` setting)
# and a line or field, or it returns the same records as the undamaged file (BOM, CRLF, white space, a huge
# cutoff change nothing). Anything else is ``traceback`` (another exception) or ``silent`` (other data).

from hypothesis import strategies as st  # noqa: E402

_EXTREMES = [10 ** 400, -(10 ** 400), 2 ** 63, -(2 ** 63) - 1, _OVERFLOW, f"-{_OVERFLOW}"]
_STRING_KINDS = ("str", "id", "strict_id")
_NUMBER_KINDS = ("number", "rank", "int", "prob", "grade", "number_or_str")
#: layouts whose reader takes the mutated file's objects as a whole, with a field table to mutate
_KINDS_WITH_OBJECTS = ("jsonl", "array", "object")


@dataclass(frozen=True)
class Generated:
    """One generated input: the layout, the mutation's name, the damaged bytes and the reader's ``top_k``."""

    layout: Layout
    mutation: str
    data: bytes
    top_k: Any = "default"


def canonical(result: Any) -> Any:
    """A comparable form of a reader's result (records as dicts; mappings and lists recursively)."""
    if hasattr(result, "to_dict"):
        return canonical(result.to_dict())
    if isinstance(result, dict):
        return {str(k): canonical(v) for k, v in result.items()}
    if isinstance(result, (list, tuple)):
        return [canonical(v) for v in result]
    if hasattr(result, "__dataclass_fields__"):
        return canonical(dataclasses.asdict(result))
    return result


def _objects(layout: Layout) -> list:
    """A deep copy of the layout's valid objects (a layout shares its list between calls: never mutate it)."""
    return json.loads(json.dumps(layout.objects())) if layout.objects is not None else []


def _serialise(layout: Layout, objs: list, text=dumps) -> bytes:
    if layout.kind == "jsonl":
        return "".join(text(o) + "\n" for o in objs).encode()
    if layout.kind == "array":
        return ("[\n" + ",\n".join(text(o) for o in objs) + "\n]\n").encode()
    return text(objs[0]).encode()


def _pick_object(draw, layout: Layout) -> tuple[list, int]:
    objs = _objects(layout)
    return objs, draw(st.integers(0, len(objs) - 1))


def _applicable(f: F, obj: Any) -> bool:
    """Whether ``f.path`` exists in ``obj`` (field tables name e.g. ``passages[0]``, ``hits[1]``)."""
    try:
        target = obj
        for part in f.path:
            target = target[part]
    except (KeyError, IndexError, TypeError):
        return False
    return True


@st.composite
def _field_swap(draw, layout: Layout) -> Generated:
    """A type swap, an extreme number or a lone surrogate in one field of the layout's table."""
    objs, i = _pick_object(draw, layout)
    fields = [f for f in layout.spec if _applicable(f, objs[i])]
    f = draw(st.sampled_from(fields))
    how = draw(st.sampled_from(["type swap", "extreme number", "surrogate"]))
    if how == "extreme number" and f.kind in _NUMBER_KINDS:
        value: Any = draw(st.sampled_from(_EXTREMES))
    elif how == "surrogate" and f.kind in _STRING_KINDS:
        value = "\ud800" + str(draw(st.sampled_from(["", "x", "q0"])))
    else:
        how = "type swap"
        value = draw(st.sampled_from(KIND_MUTATIONS[f.kind]))[1]
    objs[i] = _set(objs[i], f.path, value)
    def text(o):
        return (json.dumps(o).replace(f'"{_OVERFLOW}"', "1e999").replace(f'"-{_OVERFLOW}"', "-1e999"))
    return Generated(layout, f"{how} {f.name}", _serialise(layout, objs, text))


def _dict_paths(obj: Any, path: tuple = ()) -> list[tuple]:
    """Paths of every non-empty JSON object inside ``obj`` (``()``: ``obj`` itself)."""
    out = [path] if isinstance(obj, dict) and obj else []
    children = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in children:
        out += _dict_paths(value, path + (key,))
    return out


@st.composite
def _duplicate_key(draw, layout: Layout) -> Generated:
    """One object of the file given a key twice (the first copy's value: the same, or another)."""
    objs, i = _pick_object(draw, layout)
    path = draw(st.sampled_from(_dict_paths(objs[i])))
    target = objs[i]
    for part in path:
        target = target[part]
    key = draw(st.sampled_from(sorted(target)))
    first = draw(st.sampled_from([target[key], 0, "x", None]))
    text = "{" + json.dumps(key) + ": " + dumps(first) + ", " + dumps(target)[1:]
    marker = "__DUPLICATE_KEY__"
    objs[i] = _set(objs[i], path, marker) if path else marker
    out = _serialise(layout, objs).decode().replace(json.dumps(marker), text)
    return Generated(layout, f"duplicate key {key}", out.encode())


@st.composite
def _byte_flip(draw, layout: Layout) -> Generated:
    valid = layout.valid()
    pos = draw(st.integers(0, len(valid) - 1))
    byte = draw(st.integers(0x80, 0xFF))
    return Generated(layout, "byte flip", valid[:pos] + bytes([byte]) + valid[pos + 1:])


def _cut_points(layout: Layout, valid: bytes) -> list[int]:
    """Where a truncation is detectable: inside a line of a JSON-lines file (not at a line's end: a file of
    fewer whole lines is a valid file), before the closing bracket of a JSON document, inside the last line
    of a text layout (before its last column ends)."""
    if layout.kind == "jsonl":
        return [p for p in range(1, len(valid)) if valid[p - 1:p] != b"\n" and valid[p:p + 1] != b"\n"]
    if layout.kind in ("array", "object"):
        return list(range(1, valid.rstrip().rfind(valid.rstrip()[-1:]) + 1))
    last = valid.rstrip(b"\n").rfind(b"\n") + 1
    end = valid.rstrip(b"\n").rfind(b" " if layout.reader != "read_beir.qrels" else b"\t")
    return list(range(last + 1, end + 1)) if layout.reader != "read_trec_run" else list(range(last + 1, end))


@st.composite
def _truncation(draw, layout: Layout) -> Generated:
    valid = layout.valid()
    cut = draw(st.sampled_from(_cut_points(layout, valid)))
    return Generated(layout, "truncation", valid[:cut])


@st.composite
def _harmless(draw, layout: Layout) -> Generated:
    """Changes that change nothing: a BOM, CRLF line ends, blank lines, white space between JSON tokens or
    extra spaces between TREC columns."""
    valid = layout.valid()
    how = draw(st.sampled_from(["BOM", "CRLF", "blank lines", "white space"]))
    if how == "BOM":
        return Generated(layout, how, b"\xef\xbb\xbf" + valid)
    if how == "CRLF":
        return Generated(layout, how, valid.replace(b"\n", b"\r\n"))
    if how == "blank lines" and layout.kind in ("jsonl", "text"):
        return Generated(layout, how, valid.replace(b"\n", b"\n\n  \n", 1) + b"\n \n")
    if layout.kind in _KINDS_WITH_OBJECTS:
        def spaced(o):
            return (json.dumps(o, ensure_ascii=False, separators=(" ,  ", " :\t")))
        return Generated(layout, "white space", _serialise(layout, _objects(layout), spaced))
    sep = b"\t" if layout.reader == "read_beir.qrels" else b" "
    return Generated(layout, "white space", valid.replace(sep, sep + b" ") if sep == b" " else valid + b"\n")


@st.composite
def _duplicate_line(draw, layout: Layout) -> Generated:
    """Text layouts: a judgement or ranked document given twice."""
    lines = layout.valid().decode().splitlines(keepends=True)
    start = 1 if layout.reader == "read_beir.qrels" else 0
    i = draw(st.integers(start, len(lines) - 1))
    return Generated(layout, "duplicate line", "".join(lines[:i + 1] + [lines[i]] + lines[i + 1:]).encode())


def mutations(layout: Layout) -> st.SearchStrategy[Generated]:
    """Every generated mutation of ``layout`` (module section doc)."""
    common = [_byte_flip(layout), _truncation(layout), _harmless(layout)]
    if layout.kind in _KINDS_WITH_OBJECTS:
        return st.one_of(*common, _field_swap(layout), _duplicate_key(layout))
    return st.one_of(*common, _duplicate_line(layout))


def _cutoff_layout() -> Layout:
    """BEIR with a run: the reader that takes ``top_k`` (as records_from_run and read_ir_dataset do)."""
    def read(folder: Path, path: Path, top_k: Any = 100) -> Any:
        return read_beir(folder, run=path, top_k=top_k)
    return Layout("read_beir(top_k)", "text", "run.txt", lambda: TREC_RUN.replace(b"q1 Q0 d1", b"q1 Q0 d3"),
                  read, setup=_beir_setup(""))


def cutoffs() -> st.SearchStrategy[Generated]:
    """Negative and huge cutoffs through a reader that takes one."""
    layout = _cutoff_layout()
    values = st.one_of(st.integers(-(2 ** 70), -1), st.integers(10, 2 ** 70), st.sampled_from([-1, True, 2.5, "5"]))
    return values.map(lambda k: Generated(layout, f"top_k={k!r}", layout.valid(), k))


def generated_inputs() -> st.SearchStrategy[Generated]:
    """A generated bad (or harmless) input of any layout, or a cutoff."""
    return st.one_of(*(mutations(lay) for lay in layouts()), cutoffs())


def _read(gen: Generated, folder: Path) -> tuple[Any, Path]:
    gen.layout.setup(folder)
    path = folder / gen.layout.name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gen.data)
    if gen.top_k != "default":
        return gen.layout.read(folder, path, gen.top_k), path
    return gen.layout.read(folder, path), path


_ORIGINALS: dict[str, Any] = {}


def original(layout: Layout, folder: Path) -> Any:
    """The canonical records of the layout's undamaged fixture (read once)."""
    if layout.reader not in _ORIGINALS:
        _ORIGINALS[layout.reader] = canonical(_read(Generated(layout, "valid", layout.valid()), folder)[0])
    return _ORIGINALS[layout.reader]


def judge_generated(gen: Generated, folder: Path) -> Outcome:
    """The oracle: ``clear`` (a DataError naming the file, or the ``top_k`` setting, and a line or field; or
    the same records as the undamaged file), ``unclear`` (a DataError missing them), ``traceback``, ``silent``."""
    (folder / "orig").mkdir(parents=True, exist_ok=True)
    want = original(gen.layout, folder / "orig")
    try:
        result, path = _read(gen, folder / "damaged")
    except DataError as err:
        named = err.path == str(folder / "damaged" / gen.layout.name) or err.field == "top_k" \
            or (err.path is not None and Path(err.path).parent == folder / "damaged")
        located = err.line is not None or err.field is not None
        return Outcome("clear" if named and located else "unclear", "" if named and located else str(err), str(err))
    except Exception as err:  # noqa: BLE001 -- a raw exception is what the oracle hunts for
        return Outcome("traceback", f"{type(err).__name__}: {err}"[:300], traceback.format_exc(limit=-3))
    if canonical(result) == want:
        return Outcome("clear", "same records", "")
    return Outcome("silent", "read as other data", "")


def run_generated(n: int, seed: int, folder: Path, report: Callable[[Generated, Outcome], None] | None = None
                  ) -> collections.Counter:
    """Draw ``n`` generated inputs (hypothesis, seeded, generation only: nothing to shrink) and judge each under
    its own folder; returns the outcome counts, ``generated`` among them."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as seeded

    counts: collections.Counter = collections.Counter()

    @seeded(seed)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(generated_inputs())
    def trial(gen: Generated) -> None:
        counts["generated"] += 1
        outcome = judge_generated(gen, folder / f"g{counts['generated']:05d}")
        counts[outcome.kind] += 1
        if report is not None:
            report(gen, outcome)

    trial()
    return counts


__all__ = ["Case", "Expect", "Generated", "Outcome", "build_catalogue", "cli_cases", "generated_inputs",
           "judge_error", "judge_generated", "layouts", "normalise_field", "run_case", "valid_fixture_reads"]
