"""Helpers every reader shares: file-named validation errors, integer grades and whole-file JSON arrays.

Errors name the field in the file's own names (for whole-file JSON from the record index:
``[3].passages[2].is_relevant``); an empty file ("no records") and a query id given twice are refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

from udcg_ltr.data.jsonl import invalid_json, loads_json, raw_decode_json
from udcg_ltr.data.schema import DataError, QueryRecord, validate_record
from udcg_ltr.io import open_text

T = TypeVar("T")

_WHITESPACE = re.compile(r"[ \t\r\n]*")
_PASSAGE_FIELD = re.compile(r"passages\[(\d+)\](?:\.(\w+)(.*))?")


def validate_as_in_file(record: QueryRecord, *, qid: str = "qid", passages: str = "passages",
                        names: Mapping[str, str] | None = None, order: Sequence[int] | None = None) -> QueryRecord:
    """:func:`validate_record`, the error's field renamed from the data model's (``passages[j].pid``) to
    the file's own (``ctxs[j].id``): ``qid`` and ``passages`` are the file's keys, ``names`` maps passage
    attributes (``{"pid": "doc_id"}``), ``order[j]`` is the file position of the record's ``j``-th passage."""
    try:
        return validate_record(record)
    except DataError as err:
        name = {"qid": qid, "passages": passages}.get(err.field, err.field)
        if (match := _PASSAGE_FIELD.fullmatch(err.field or "")) is not None:
            j = int(match.group(1))
            name = f"{passages}[{order[j] if order is not None else j}]"
            if match.group(2) is not None:
                name += f".{(names or {}).get(match.group(2), match.group(2))}{match.group(3)}"
        raise DataError(err.reason, field=name) from None


def parse_grade(text: str) -> int:
    """An integer grade from a TSV / TREC column: ``"2"``, or ``"2.0"`` as some BEIR sets write; ``"inf"``,
    ``"1.5"``, ``"high"``, a 400-digit number are :class:`DataError` s without location (the caller adds file,
    line, column). Negative grades are read (TREC's -1 / -2 junk judgements); callers bound them where the
    data model must (record labels are 0..5)."""
    value = None
    with contextlib.suppress(ValueError):
        value = int(text)
    if value is None:
        with contextlib.suppress(ValueError):
            if (number := float(text)).is_integer():  # False for nan and +-inf too
                value = int(number)
    if value is not None and abs(value) <= 2 ** 31:
        return value
    raise DataError(f"expected an integer grade (at most 10 digits), got {text!r:.40}")


def _read_records_text(path: str | os.PathLike) -> str:
    with open_text(path) as f:
        text = f.read()
    if not text.strip():
        raise DataError("no records (the file is empty)", path=str(path))
    return text


def load_json(path: str | os.PathLike) -> Any:
    """Parse a whole JSON file (``.gz`` transparently): strict (:func:`~udcg_ltr.data.jsonl.loads_json`),
    errors naming the file, line and column (or field); an empty file is "no records"."""
    text = _read_records_text(path)
    try:
        return loads_json(text)
    except json.JSONDecodeError as err:
        raise invalid_json(err, path, err.lineno) from None
    except DataError as err:
        raise err.located(path=path) from None


def parse_json_array(path: str | os.PathLike, parse: Callable[[Any], T], *,
                     unique: Callable[[T], Hashable] | None = None, unique_field: str = "qid") -> list[T]:
    """Apply ``parse`` to each element of a file holding one JSON array, decoded one at a time so that errors
    name the file, the element's starting line and ``[i].field``; a repeated ``unique(item)`` (query id)
    names ``[i].<unique_field>``, an empty array is "no records"."""
    text = _read_records_text(path)

    def skip(pos: int) -> int:
        return _WHITESPACE.match(text, pos).end()

    def fail(message: str, pos: int, field: str | None = None) -> DataError:
        return DataError(message, path=str(path), line=text.count("\n", 0, pos) + 1, field=field)

    pos = skip(0)
    if text[pos:pos + 1] != "[":
        raise fail("expected a JSON array of records", pos)
    pos = skip(pos + 1)
    out: list[T] = []
    seen: dict[Hashable, int] = {}
    line, counted = 1, 0
    while text[pos:pos + 1] != "]":
        index = len(out)
        line += text.count("\n", counted, pos)  # counted incrementally: files may be large, elements many
        counted = pos
        try:
            obj, end = raw_decode_json(text, pos)
        except json.JSONDecodeError as err:
            raise invalid_json(err, path, err.lineno, field=f"[{index}]") from None
        except DataError as err:
            raise err.located(path=path, line=line, prefix=f"[{index}]") from None
        try:  # apart from the decoding: a parser's own error is about the element, not invalid JSON
            item = parse(obj)
        except DataError as err:
            raise err.located(path=path, line=line, prefix=f"[{index}]") from None
        if unique is not None:
            key = unique(item)
            if key in seen:
                raise DataError(f"duplicate {unique_field} {key!r}: appears twice (also at [{seen[key]}])",
                                path=str(path), line=line, field=f"[{index}].{unique_field}")
            seen[key] = index
        out.append(item)
        pos = skip(end)
        if text[pos:pos + 1] == ",":
            pos = skip(pos + 1)
            if text[pos:pos + 1] == "]":  # json.loads refuses "[1,]": so does the element-wise decoding
                raise fail("trailing comma before ']' (not JSON)", pos, f"[{index}]")
        elif text[pos:pos + 1] != "]":
            raise fail("expected ',' or ']' after an array element", pos, f"[{index}]")
    if skip(pos + 1) < len(text):
        raise fail("unexpected data after the JSON array", skip(pos + 1))
    if not out:
        raise DataError("no records (the JSON array is empty)", path=str(path))
    return out
