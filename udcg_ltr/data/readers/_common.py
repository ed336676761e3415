"""Helpers every reader shares: file-named validation errors, integer grades and whole-file JSON arrays.

Malformed input is reported one way by every reader: a :class:`DataError` naming the file, the line
and the field, in the file's own names (:func:`validate_as_in_file`); for whole-file JSON the field
starts with the record index (``[3].passages[2].is_relevant``). Every reader refuses an empty file
("no records") and a query id given twice.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from udcg_ltr.data.jsonl import invalid_json, loads_json, raw_decode_json
from udcg_ltr.data.schema import DataError, QueryRecord, validate_record
from udcg_ltr.io import open_text

T = TypeVar("T")

_WHITESPACE = re.compile(r"[ \t\r\n]*")
_PASSAGE_FIELD = re.compile(r"passages\[(\d+)\](?:\.(\w+)(.*))?")

__all__ = ["iter_json_array", "load_json", "parse_grade", "parse_json_array", "validate_as_in_file"]


def validate_as_in_file(record: QueryRecord, *, qid: str = "qid", passages: str = "passages",
                        names: Mapping[str, str] | None = None, order: Sequence[int] | None = None) -> QueryRecord:
    """:func:`validate_record`, with the error's field renamed to the file's own names.

    ``validate_record`` speaks the data model (``qid``, ``passages[j].pid``); a user reads the file
    (``example_id``, ``ctxs[j].id``). ``qid`` is the file's query id key, ``passages`` its list of
    candidates, ``names`` maps passage attributes (``{"pid": "doc_id", "relevance": "is_relevant"}``),
    ``order[j]`` is the file position of the record's ``j``-th passage when the reader reordered them.
    """
    try:
        return validate_record(record)
    except DataError as err:
        name = err.field
        match = _PASSAGE_FIELD.fullmatch(name or "")
        if name == "qid":
            name = qid
        elif name == "passages":
            name = passages
        elif match is not None:
            j = int(match.group(1))
            name = f"{passages}[{order[j] if order is not None else j}]"
            if match.group(2) is not None:
                name += f".{(names or {}).get(match.group(2), match.group(2))}{match.group(3)}"
        raise DataError(err.reason, field=name) from None


def parse_grade(text: str) -> int:
    """An integer grade from a TSV / TREC column: ``"2"``, or ``"2.0"`` as some BEIR sets write; ``"inf"``,
    ``"1.5"``, ``"high"`` are :class:`DataError` s without location (the caller adds file, line, column)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value.is_integer():  # False for nan and +-inf too
        raise DataError(f"expected an integer grade, got {text!r}")
    return int(value)


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


def iter_json_array(path: str | os.PathLike) -> Iterator[tuple[int, int, Any]]:
    """Yield ``(index, line, element)`` for each element of a file holding one JSON array, decoded one at a
    time so that errors about an element name its starting line and its index."""
    text = _read_records_text(path)

    def skip(pos: int) -> int:
        return _WHITESPACE.match(text, pos).end()

    def fail(message: str, pos: int, field: str | None = None) -> DataError:
        return DataError(message, path=str(path), line=text.count("\n", 0, pos) + 1, field=field)

    pos = skip(0)
    if text[pos:pos + 1] != "[":
        raise fail("expected a JSON array of records", pos)
    pos = skip(pos + 1)
    index, line, counted = 0, 1, 0
    while text[pos:pos + 1] != "]":
        line += text.count("\n", counted, pos)  # counted incrementally: files may be large, elements many
        counted = pos
        try:
            obj, end = raw_decode_json(text, pos)
        except json.JSONDecodeError as err:
            raise invalid_json(err, path, err.lineno, field=f"[{index}]") from None
        except DataError as err:
            raise err.located(path=path, line=line, prefix=f"[{index}]") from None
        yield index, line, obj
        index += 1
        pos = skip(end)
        if text[pos:pos + 1] == ",":
            pos = skip(pos + 1)
        elif text[pos:pos + 1] != "]":
            raise fail("expected ',' or ']' after an array element", pos, f"[{index - 1}]")
    if skip(pos + 1) < len(text):
        raise fail("unexpected data after the JSON array", skip(pos + 1))


def parse_json_array(path: str | os.PathLike, parse: Callable[[Any], T], *,
                     unique: Callable[[T], Hashable] | None = None, unique_field: str = "qid") -> list[T]:
    """Apply ``parse`` to each element of a JSON-array file, errors naming file, line and ``[i].field``;
    a repeated ``unique(item)`` (query id) names ``[i].<unique_field>``, an empty array is "no records"."""
    out: list[T] = []
    seen: dict[Hashable, int] = {}
    for index, line, obj in iter_json_array(path):
        try:
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
    if not out:
        raise DataError("no records (the JSON array is empty)", path=str(path))
    return out
