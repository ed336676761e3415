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

This module also holds the small helpers the other readers share for whole-file JSON inputs
(:func:`iter_json_array`, :func:`load_json`) and for checking fields (:func:`get_field`), so
that every reader reports malformed input the same way: a :class:`DataError` naming the file,
the line and the field (for whole-file JSON the field starts with the record index, e.g.
``[3].passages[2].is_relevant``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from udcg_ltr.data.schema import DataError, Passage, QueryRecord, validate_record
from udcg_ltr.io import open_text
from udcg_ltr.paths import shared_file

T = TypeVar("T")

_MISSING = object()

#: Human names for the JSON types :func:`get_field` checks against.
_TYPE_NAMES = {str: "a string", bool: "true/false", int: "an integer", float: "a number",
               list: "a list", dict: "an object"}


# ---- shared helpers ------------------------------------------------------------------------

def get_field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str = "",
              *, optional: bool = False, default: Any = None) -> Any:
    """``obj[key]`` checked to be of JSON type ``kind``; a :class:`DataError` naming the field otherwise.

    ``where`` is the field path of ``obj`` (e.g. ``"passages[2]"``); the error field is
    ``where.key``. ``float`` accepts integers too (JSON has one number type); ``int`` and
    ``float`` refuse booleans (``true`` is not a label or a score). With ``optional=True`` a
    missing key or a JSON ``null`` gives ``default``.
    """
    name = f"{where}.{key}" if where else key
    if not isinstance(obj, Mapping):
        raise DataError(f"expected an object, got {type(obj).__name__}", field=where or None)
    value = obj.get(key, _MISSING)
    if value is _MISSING or value is None:
        if optional:
            return default
        raise DataError("missing" if value is _MISSING else "must not be null", field=name)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds and int not in kinds:
        kinds = kinds + (int,)
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        expected = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds if not (k is int and float in kinds))
        raise DataError(f"expected {expected}, got {type(value).__name__} {value!r:.60}", field=name)
    if isinstance(value, float) and not math.isfinite(value):
        raise DataError(f"expected a finite number, got {value!r}", field=name)
    return value


def get_str_list(obj: Mapping[str, Any], key: str, where: str = "", *, optional: bool = False) -> list[str]:
    """A list of strings under ``key`` (e.g. gold answers), each element checked."""
    values = get_field(obj, key, list, where, optional=optional, default=[])
    name = f"{where}.{key}" if where else key
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise DataError(f"expected a string, got {type(v).__name__} {v!r:.60}", field=f"{name}[{i}]")
    return list(values)


def prefix_field(err: DataError, prefix: str, *, path: str | os.PathLike | None = None,
                 line: int | None = None) -> DataError:
    """A copy of ``err`` whose field is prefixed by ``prefix`` (``"[3]"`` + ``"passages[0].pid"``)."""
    if err.field and prefix:
        sep = "" if err.field.startswith("[") else "."
        field = f"{prefix}{sep}{err.field}"
    else:
        field = err.field or prefix or None
    return DataError(err.reason, path=str(path) if path is not None else err.path,
                     line=line if line is not None else err.line, field=field)


def has_answer_tokens(tokens: Sequence[str], targets: Iterable[Sequence[str]]) -> bool:
    """:func:`udcg_ltr.text.has_answer` on pre-normalised tokens.

    ``tokens`` = ``answer_tokens(passage)``, ``targets`` = ``[answer_tokens(a) for a in answers]``.
    Readers that test many (question, passage) pairs normalise each passage once with this.
    """
    positions: dict[str, list[int]] | None = None
    for target in targets:
        if not target:
            continue
        if positions is None:
            positions = {}
            for i, t in enumerate(tokens):
                positions.setdefault(t, []).append(i)
        n = len(target)
        for i in positions.get(target[0], ()):
            if list(tokens[i:i + n]) == list(target):
                return True
    return False


def load_json(path: str | os.PathLike) -> Any:
    """Parse a whole JSON file (``.gz`` transparently); invalid JSON names the file, line and column."""
    with open_text(path) as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"invalid JSON ({err.msg} at column {err.colno})", path=str(path), line=err.lineno) from None


def iter_json_array(path: str | os.PathLike) -> Iterator[tuple[int, int, Any]]:
    """Yield ``(index, line, element)`` for each element of a file holding one JSON array.

    Elements are decoded one at a time so that each one's starting line is known: errors
    about an element can then name the file, its line and its index.
    """
    with open_text(path) as f:
        text = f.read()
    decoder = json.JSONDecoder()
    pos = _skip_ws(text, 0)

    def where(p: int) -> int:
        return text.count("\n", 0, p) + 1

    if pos >= len(text) or text[pos] != "[":
        raise DataError("expected a JSON array of records", path=str(path), line=where(pos))
    pos = _skip_ws(text, pos + 1)
    if pos < len(text) and text[pos] == "]":
        _expect_end(text, pos + 1, path, where)
        return
    index, line, lines_seen_pos = 0, 1, 0
    while True:
        # count newlines incrementally: files may be large, elements many
        line += text.count("\n", lines_seen_pos, pos)
        lines_seen_pos = pos
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise DataError(f"invalid JSON ({err.msg} at column {err.colno})", path=str(path),
                            line=err.lineno, field=f"[{index}]") from None
        yield index, line, obj
        index += 1
        pos = _skip_ws(text, end)
        if pos < len(text) and text[pos] == ",":
            pos = _skip_ws(text, pos + 1)
            continue
        if pos < len(text) and text[pos] == "]":
            _expect_end(text, pos + 1, path, where)
            return
        raise DataError("expected ',' or ']' after an array element", path=str(path), line=where(pos),
                        field=f"[{index - 1}]")


def parse_json_array(path: str | os.PathLike, parse: Callable[[Any], T]) -> list[T]:
    """Apply ``parse`` to each element of a JSON-array file, errors naming file, line and ``[i].field``."""
    out = []
    for index, line, obj in iter_json_array(path):
        try:
            out.append(parse(obj))
        except DataError as err:
            raise prefix_field(err, f"[{index}]", path=path, line=line) from None
    return out


def _skip_ws(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _expect_end(text: str, pos: int, path, where) -> None:
    pos = _skip_ws(text, pos)
    if pos < len(text):
        raise DataError("unexpected data after the JSON array", path=str(path), line=where(pos))


# ---- the reference layout ------------------------------------------------------------------

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
