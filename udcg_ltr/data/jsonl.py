"""JSONL in and out for :class:`~udcg_ltr.data.schema.QueryRecord` (``*.jsonl`` or ``*.jsonl.gz``).

Round trip is exact: ``write_records(read_records(f))`` reproduces a file this module wrote, byte
for byte, and ``read_records(write_records(rs)) == rs``. Errors name the file, the line and the field.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from udcg_ltr.data.schema import DataError, QueryRecord, validate_record
from udcg_ltr.io import atomic_open, open_text


def iter_json_lines(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, parsed_object)`` for each non-blank line; bad JSON names file and line."""
    with open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"invalid JSON ({err.msg} at column {err.colno})", path=str(path),
                                line=lineno) from None


def parse_lines(path: str | os.PathLike, parse: Callable[[Any], Any]) -> Iterator[Any]:
    """Apply ``parse`` to every JSON line, re-raising its :class:`DataError` with file and line attached."""
    for lineno, obj in iter_json_lines(path):
        try:
            yield parse(obj)
        except DataError as err:
            raise DataError(err.reason, path=str(path), line=lineno, field=err.field) from None
        except (KeyError, TypeError, ValueError) as err:
            raise DataError(f"{type(err).__name__}: {err}", path=str(path), line=lineno) from None


def read_records(path: str | os.PathLike, *, validate: bool = True, allow_empty: bool = False) -> list[QueryRecord]:
    """Read a JSONL file of query records written by :func:`write_records`."""
    records = []
    for lineno, obj in iter_json_lines(path):
        try:
            record = QueryRecord.from_dict(obj)
        except DataError as err:
            raise DataError(err.reason, path=str(path), line=lineno, field=err.field) from None
        if validate:
            validate_record(record, path=str(path), line=lineno, allow_empty=allow_empty)
        records.append(record)
    return records


def dumps_record(record: QueryRecord) -> str:
    return json.dumps(record.to_dict(), ensure_ascii=False, separators=(",", ":"))


def write_records(path: str | os.PathLike, records: Iterable[QueryRecord]) -> Path:
    """Write records atomically, one JSON object per line (gzip when the name ends in ``.gz``)."""
    path = Path(path)
    with atomic_open(path, "w") as f:
        for r in records:
            f.write(dumps_record(r))
            f.write("\n")
    return path
