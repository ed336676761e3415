"""JSONL in and out for :class:`~udcg_ltr.data.schema.QueryRecord` (``*.jsonl`` or ``*.jsonl.gz``).

Round trip is exact: ``write_records(read_records(f))`` reproduces a file this module wrote, byte for
byte. JSON is strict in every reader: ``NaN``, ``Infinity`` and ``1e999`` are not JSON numbers (RFC
8259) and are refused with the field that holds them, so none reaches a metric; so are integers beyond 64
bits, a key repeated in one object (the last would silently win) and lone surrogate escapes (``"\\ud800"``:
not text, it crashes the first UTF-8 write); :func:`dumps_json`
refuses them too, so the toolkit never writes what it would refuse to read.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from udcg_ltr.data.schema import DataError, QueryRecord, validate_record
from udcg_ltr.io import atomic_open, open_text

T = TypeVar("T")


class _NonFinite(Exception):
    """Raised by the strict decoder's hooks; the lax decoder then locates the value for the message."""


class _Refused(Exception):
    """Raised by the strict decoder on a repeated key (its name); a marking decoder then locates it."""


#: Integers beyond 64 bits are refused: no id, rank, count or label needs them, and a 400-digit "rank"
#: read fine would crash later (numpy, torch and every TREC tool hold 64-bit integers).
MAX_INT = 2 ** 63 - 1
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _finite_float(text: str) -> float:
    """A JSON number or constant (``NaN``, ``Infinity``) as a float; non-finite ones ("1e999" too) refused."""
    value = float(text)
    if not math.isfinite(value):
        raise _NonFinite(text)
    return value


def _bounded_int(text: str) -> int:
    """A JSON integer within 64 bits; a longer one is refused (its digits cut to 20 in the message)."""
    value = int(text)
    if -MAX_INT - 1 <= value <= MAX_INT:
        return value
    raise _NonFinite(text[:20] + ("..." if len(text) > 20 else ""))


class _Repeated(dict):
    """An object decoded by the locating pass that had a repeated key (``repeated``)."""

    repeated = ""


def _repeated_key(pairs: list[tuple[str, Any]]) -> str | None:
    seen: set[str] = set()
    return next((k for k, _ in pairs if k in seen or seen.add(k)), None)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """An object whose keys are distinct: with a repeated key the last value would silently win (a label
    flipping from 1 to 0 without a word)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Refused(_repeated_key(pairs))
    return obj


def _marking_keys(pairs: list[tuple[str, Any]]) -> dict:
    """The locating pass: an object with a repeated key is kept, marked, so its field path can be named."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        obj = _Repeated(obj)
        obj.repeated = _repeated_key(pairs)
    return obj


_STRICT = json.JSONDecoder(parse_constant=_finite_float, parse_float=_finite_float, parse_int=_bounded_int,
                           object_pairs_hook=_unique_keys)
_LAX = json.JSONDecoder()
_MARKING = json.JSONDecoder(object_pairs_hook=_marking_keys)


def repeated_key_field(obj: Any, where: str = "") -> str | None:
    """The field path (``passages[0].relevance``) of the first key repeated in one object, else None."""
    if isinstance(obj, _Repeated):
        return f"{where}.{obj.repeated}" if where else obj.repeated
    return _first_child(obj, where, repeated_key_field)


def _repeated_error(obj: Any, key: str) -> DataError:
    return DataError(f"key {key!r} given twice in one object (the last would silently win)",
                     field=repeated_key_field(obj) or key)


def non_finite_field(obj: Any, where: str = "") -> str | None:
    """The field path (``passages[1].score``) of the first NaN or infinite number (or integer beyond 64 bits)
    in ``obj``, else None."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else (where or "(value)")
    if isinstance(obj, int) and not isinstance(obj, bool):
        return None if -MAX_INT - 1 <= obj <= MAX_INT else (where or "(value)")
    return _first_child(obj, where, non_finite_field)


def _first_child(obj: Any, where: str, find: Callable[[Any, str], str | None]) -> str | None:
    """``find`` over the children of a JSON object or array, with their field paths; the first hit."""
    if isinstance(obj, Mapping):
        children = [(f"{where}.{key}" if where else str(key), value) for key, value in obj.items()]
    else:
        children = [(f"{where}[{i}]", value) for i, value in enumerate(obj)] if isinstance(obj, (list, tuple)) else []
    found = (find(value, name) for name, value in children)
    return next((f for f in found if f is not None), None)


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def surrogate_field(obj: Any, where: str = "") -> str | None:
    """The field path of the first string (or key) holding a lone UTF-16 surrogate (``"\\ud800"``), else
    None: such a string cannot be written as UTF-8, so it would crash the final write, after the LLM work."""
    if isinstance(obj, str):
        return (where or "(value)") if _has_lone_surrogate(obj) else None
    if isinstance(obj, Mapping):
        for key in obj:
            if _has_lone_surrogate(key):
                return f"{where}.{key!a}" if where else ascii(key)
    return _first_child(obj, where, surrogate_field)


def _non_finite_error(obj: Any, token: str) -> DataError:
    return DataError(f"number {token} is not finite or not a 64-bit integer (NaN and Infinity are not valid JSON "
                     "numbers)", field=non_finite_field(obj))


def _check_surrogates(text: str, obj: Any) -> Any:
    """``obj`` unless its text escapes a surrogate and a lone one survived decoding (pairs are fine)."""
    if "\\u" in text and _SURROGATE_ESCAPE.search(text) and (field := surrogate_field(obj)) is not None:
        raise DataError("lone UTF-16 surrogate escape in a string: not valid Unicode text", field=field)
    return obj


def loads_json(text: str) -> Any:
    """``json.loads`` refusing NaN / Infinity / overflowing numbers, integers beyond 64 bits, duplicate keys and
    lone surrogates (a :class:`DataError` naming the field); syntax errors stay ``json.JSONDecodeError``
    (callers know the file and line to report)."""
    try:
        return _check_surrogates(text, _STRICT.decode(text))
    except _NonFinite as err:
        raise _non_finite_error(_LAX.decode(text), str(err)) from None
    except _Refused as err:
        raise _repeated_error(_MARKING.decode(text), err.args[0]) from None


def raw_decode_json(text: str, pos: int) -> tuple[Any, int]:
    """``JSONDecoder.raw_decode`` at ``pos`` with the same refusals as :func:`loads_json`."""
    try:
        obj, end = _STRICT.raw_decode(text, pos)
    except _NonFinite as err:
        raise _non_finite_error(_LAX.raw_decode(text, pos)[0], str(err)) from None
    except _Refused as err:
        raise _repeated_error(_MARKING.raw_decode(text, pos)[0], err.args[0]) from None
    return _check_surrogates(text[pos:end], obj), end


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
