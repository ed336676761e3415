"""Atomic file writes and compressed-or-plain file opening, shared by caches, checkpoints and reports.

An atomic write goes to a temporary file in the destination folder, is flushed and fsynced, then
renamed over the destination (``os.replace`` is atomic on POSIX and Windows): a reader sees the old
file or the new one, never half of one, and a killed writer leaves the old file intact.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

# mkstemp creates files readable by their owner only; published files get the usual umask-based mode.
_UMASK = os.umask(0)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary sibling of ``path`` for writing; on clean exit, fsync and rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    binary = "b" in mode
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        raw = os.fdopen(fd, "wb")
        stream: IO = raw
        gz = None
        if path.suffix == ".gz":
            # mtime=0 keeps gzip output byte-identical across runs (same seed, same bytes).
            gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0)
            stream = gz
        if not binary:
            stream = io.TextIOWrapper(stream, encoding=encoding, newline="\n")
        try:
            yield stream
        finally:
            stream.flush()
            if not binary:
                stream.detach()
            if gz is not None:
                gz.close()
            raw.flush()
            os.fsync(raw.fileno())
            raw.close()
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path, "w") as f:
        f.write(text)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_open(path, "wb") as f:
        f.write(data)


def atomic_write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 2) -> None:
    atomic_write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False, sort_keys=False) + "\n")


def open_text(path: str | os.PathLike) -> IO[str]:
    """Open a UTF-8 text file for reading, transparently gunzipping ``*.gz``."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling directory of ``path`` to fill; on clean exit it replaces ``path`` by rename.

    A reader sees the previous directory or the new one, never a mix (the old one is moved aside
    first, then deleted); a crash inside the block leaves ``path`` as it was. Used for saved models.
    """
    import shutil

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        os.chmod(tmp, 0o777 & ~_UMASK)  # mkdtemp makes it private; a saved model is meant to be shared
        yield tmp
        old = None
        if path.exists():
            old = path.parent / f".{path.name}.old"
            if old.exists():
                shutil.rmtree(old)
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def json_safe(obj: Any) -> Any:
    """A JSON-serialisable copy of ``obj``: numpy -> Python, NaN/inf -> None, paths -> str, recursively."""
    import math

    import numpy as np

    if isinstance(obj, dict) or (hasattr(obj, "items") and hasattr(obj, "keys")):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return None if math.isnan(v) or math.isinf(v) else v
    if isinstance(obj, Path):
        return str(obj)
    return obj
