"""JSONL in and out for :class:`~udcg_ltr.data.schema.QueryRecord` (``*.jsonl`` or ``*.jsonl.gz``).

Round trip is exact: ``write_records(read_records(f))`` reproduces a file this module wrote, byte for
byte. JSON is strict in every reader: ``NaN``, ``Infinity`` and ``1e999`` are not JSON numbers (RFC
8259) and are refused with the field that holds them, so none reaches a metric; :func:`dumps_json`
refuses them too, so the toolkit never writes what it would refuse to read.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from udcg_ltr.data.schema import DataError, QueryRecord, validate_record
from udcg_ltr.io import atomic_open, open_text

T = TypeVar("T")


class _NonFinite(Exception):
    """Raised by the strict decoder's hooks; the lax decoder then locates the value for the message."""


def _finite_float(text: str) -> float:
    """A JSON number or constant (``NaN``, ``Infinity``) as a float; non-finite ones ("1e999" too) refused."""
    value = float(text)
    if not math.isfinite(value):
        raise _NonFinite(text)
    return value


_STRICT = json.JSONDecoder(parse_constant=_finite_float, parse_float=_finite_float)
_LAX = json.JSONDecoder()


def non_finite_field(obj: Any, where: str = "") -> str | None:
    """The field path (``passages[1].score``) of the first NaN or infinite number in ``obj``, else None."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else (where or "(value)")
    if isinstance(obj, Mapping):
        children = [(f"{where}.{key}" if where else str(key), value) for key, value in obj.items()]
    else:
        children = [(f"{where}[{i}]", value) for i, value in enumerate(obj)] if isinstance(obj, (list, tuple)) else []
    found = (non_finite_field(value, name) for name, value in children)
    return next((f for f in found if f is not None), None)


def _non_finite_error(obj: Any, token: str) -> DataError:
    return DataError(f"number {token} is not finite (NaN and Infinity are not valid JSON numbers)",
                     field=non_finite_field(obj))


def loads_json(text: str) -> Any:
    """``json.loads`` refusing NaN / Infinity / overflowing numbers (a :class:`DataError` naming the field);
    syntax errors stay ``json.JSONDecodeError`` (callers know the file and line to report)."""
    try:
        return _STRICT.decode(text)
    except _NonFinite as err:
        raise _non_finite_error(_LAX.decode(text), str(err)) from None


def raw_decode_json(text: str, pos: int) -> tuple[Any, int]:
    """``JSONDecoder.raw_decode`` at ``pos`` with the same refusal of non-finite numbers as :func:`loads_json`."""
    try:
        return _STRICT.raw_decode(text, pos)
    except _NonFinite as err:
        raise _non_finite_error(_LAX.raw_decode(text, pos)[0], str(err)) from None


def invalid_json(err: json.JSONDecodeError, path: str | os.PathLike, line: int, field: str | None = None) -> DataError:
    """A JSON syntax error as a :class:`DataError` naming the file, the line and the column."""
    return DataError(f"invalid JSON ({err.msg} at column {err.colno})", path=path, line=line, field=field)


def iter_json_lines(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """``(line, object)`` of each non-blank line; bad input is a :class:`DataError` naming the line."""
    with open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = loads_json(line)
            except json.JSONDecodeError as err:
                raise invalid_json(err, path, lineno) from None
            except DataError as err:
                raise err.located(path=path, line=lineno) from None
            yield lineno, obj


def parse_lines(path: str | os.PathLike, parse: Callable[[Any], T], *, unique: Callable[[T], Hashable] | None = None,
                unique_field: str = "qid", allow_empty: bool = False) -> Iterator[T]:
    """Apply ``parse`` to every JSON line, its :class:`DataError` s given file and line; a repeated
    ``unique(item)`` (query id) names ``unique_field``; no item is "no records" (unless ``allow_empty``)."""
    seen: dict[Hashable, int] = {}
    n = 0
    for lineno, obj in iter_json_lines(path):
        try:
            item = parse(obj)
        except DataError as err:
            raise err.located(path=path, line=lineno) from None
        except (KeyError, TypeError, ValueError) as err:
            raise DataError(f"{type(err).__name__}: {err}", path=str(path), line=lineno) from None
        if unique is not None:
            key = unique(item)
            if key in seen:
                raise DataError(f"duplicate {unique_field} {key!r} (first on line {seen[key]})", path=str(path),
                                line=lineno, field=unique_field)
            seen[key] = lineno
        n += 1
        yield item
    if n == 0 and not allow_empty:
        raise DataError("no records (the file is empty)", path=str(path))


def read_records(path: str | os.PathLike, *, validate: bool = True, allow_empty: bool = False) -> list[QueryRecord]:
    """Read a JSONL file of query records written by :func:`write_records` (``allow_empty``: a record may
    have an empty candidate list; the file itself must hold at least one record)."""
    def parse(obj: Any) -> QueryRecord:
        record = QueryRecord.from_dict(obj)
        return validate_record(record, allow_empty=allow_empty) if validate else record

    return list(parse_lines(path, parse, unique=lambda r: r.qid))


def dumps_json(obj: Any, qid: str, where: str = "") -> str:
    """``obj`` as compact exact JSON; a NaN or infinite number is a ``ValueError`` naming query and field
    (``where``: the field path of ``obj`` within the record, ``"passages[0].extra"``)."""
    try:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        if (inner := non_finite_field(obj)) is None and not where:
            raise
        field = ".".join(part for part in (where, inner) if part)
        raise ValueError(f"query {qid!r}: field {field} is not finite; NaN and Infinity are not JSON "
                         "(store None for a missing value)") from None


def dumps_record(record: QueryRecord) -> str:
    """One record as a JSON line (:func:`dumps_json`)."""
    return dumps_json(record.to_dict(), record.qid)


def write_lines(path: str | os.PathLike, lines: Iterable[str]) -> Path:
    """Write ``lines`` (without their newlines) atomically, gzipped when the name ends in ``.gz``."""
    path = Path(path)
    with atomic_open(path, "w") as f:
        f.writelines(line + "\n" for line in lines)
    return path


def write_records(path: str | os.PathLike, records: Iterable[QueryRecord]) -> Path:
    """Write records one JSON object per line (:func:`write_lines`)."""
    return write_lines(path, map(dumps_record, records))
