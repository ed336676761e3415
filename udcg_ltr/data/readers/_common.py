"""Helpers every reader shares for checking JSON fields and walking whole-file JSON arrays.

Malformed input is reported the same way by every reader: a :class:`DataError` naming the file,
the line and the field (for whole-file JSON the field starts with the record index, e.g.
``[3].passages[2].is_relevant``), in the file's own names (:func:`validate_as_in_file`). The typed
field getters (:func:`get_field`, :func:`get_str_list`) live in :mod:`udcg_ltr.data.schema`, below
the readers, and are re-exported here; strict JSON (no NaN / Infinity) is
:func:`udcg_ltr.data.jsonl.loads_json`. Every reader refuses an empty file ("no records") and a
query id given twice.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from udcg_ltr.data.jsonl import loads_json, raw_decode_json
from udcg_ltr.data.schema import DataError, QueryRecord, get_field, get_str_list, validate_record
from udcg_ltr.io import open_text

T = TypeVar("T")

__all__ = ["file_field", "get_field", "get_str_list", "iter_json_array", "load_json", "parse_grade",
           "parse_json_array", "prefix_field", "validate_as_in_file"]


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
        raise DataError(err.reason, field=file_field(err.field, qid=qid, passages=passages, names=names,
                                                     order=order)) from None


def file_field(name: str | None, *, qid: str = "qid", passages: str = "passages",
               names: Mapping[str, str] | None = None, order: Sequence[int] | None = None) -> str | None:
    """A data-model field name (``passages[3].pid``) in a file's own names (see :func:`validate_as_in_file`)."""
    if name is None:
        return None
    if name == "qid":
        return qid
    match = re.fullmatch(r"passages\[(\d+)\](?:\.(\w+)(.*))?", name)
    if match is None:
        return passages if name == "passages" else name
    j = int(match.group(1))
    where = f"{passages}[{order[j] if order is not None else j}]"
    if match.group(2) is None:
        return where
    return f"{where}.{(names or {}).get(match.group(2), match.group(2))}{match.group(3)}"


def parse_grade(text: str) -> int:
    """An integer relevance grade from a TSV / TREC column: ``"2"``, or ``"2.0"`` as some BEIR sets write.

    ``"inf"``, ``"nan"``, ``"1.5"``, ``"high"`` are :class:`DataError` s (without location: the caller
    adds file, line and column).
    """
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"expected an integer grade, got {text!r}") from None
    if not value.is_integer():  # False for nan and +-inf too
        raise DataError(f"expected an integer grade, got {text!r}")
    return int(value)


def load_json(path: str | os.PathLike) -> Any:
    """Parse a whole JSON file (``.gz`` transparently); invalid JSON names the file, line and column.

    An empty file is "no records"; a NaN / Infinity anywhere names its field (see
    :func:`udcg_ltr.data.jsonl.loads_json`).
    """
    with open_text(path) as f:
        text = f.read()
    if not text.strip():
        raise DataError("no records (the file is empty)", path=str(path))
    try:
        return loads_json(text)
    except json.JSONDecodeError as err:
        raise DataError(f"invalid JSON ({err.msg} at column {err.colno})", path=str(path), line=err.lineno) from None
    except DataError as err:
        raise DataError(err.reason, path=str(path), field=err.field) from None


def iter_json_array(path: str | os.PathLike) -> Iterator[tuple[int, int, Any]]:
    """Yield ``(index, line, element)`` for each element of a file holding one JSON array.

    Elements are decoded one at a time so that each one's starting line is known: errors
    about an element can then name the file, its line and its index.
    """
    with open_text(path) as f:
        text = f.read()
    if not text.strip():
        raise DataError("no records (the file is empty)", path=str(path))
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
            obj, end = raw_decode_json(text, pos)
        except json.JSONDecodeError as err:
            raise DataError(f"invalid JSON ({err.msg} at column {err.colno})", path=str(path),
                            line=err.lineno, field=f"[{index}]") from None
        except DataError as err:
            raise prefix_field(err, f"[{index}]", path=path, line=line) from None
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


def parse_json_array(path: str | os.PathLike, parse: Callable[[Any], T], *,
                     unique: Callable[[T], Hashable] | None = None, unique_field: str = "qid",
                     allow_empty: bool = False) -> list[T]:
    """Apply ``parse`` to each element of a JSON-array file, errors naming file, line and ``[i].field``.

    ``unique(item)`` is an element's identity (its query id): a repeated one is an error naming
    the element's line and ``[i].<unique_field>``. An empty array is "no records" unless ``allow_empty``.
    """
    out: list[T] = []
    seen: dict[Hashable, int] = {}
    for index, line, obj in iter_json_array(path):
        try:
            item = parse(obj)
        except DataError as err:
            raise prefix_field(err, f"[{index}]", path=path, line=line) from None
        if unique is not None:
            key = unique(item)
            if key in seen:
                raise DataError(f"duplicate {unique_field} {key!r}: appears twice (also at [{seen[key]}])",
                                path=str(path),
                                line=line, field=f"[{index}].{unique_field}")
            seen[key] = index
        out.append(item)
    if not out and not allow_empty:
        raise DataError("no records (the JSON array is empty)", path=str(path))
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
