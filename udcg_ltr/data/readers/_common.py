"""Helpers every reader shares for checking JSON fields and walking whole-file JSON arrays.

Malformed input is reported the same way by every reader: a :class:`DataError` naming the file,
the line and the field (for whole-file JSON the field starts with the record index, e.g.
``[3].passages[2].is_relevant``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from udcg_ltr.data.schema import DataError
from udcg_ltr.io import open_text

T = TypeVar("T")

_MISSING = object()

#: Human names for the JSON types :func:`get_field` checks against.
_TYPE_NAMES = {str: "a string", bool: "true/false", int: "an integer", float: "a number",
               list: "a list", dict: "an object"}


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
