"""Atomic file writes and strict compressed-or-plain reading, shared by caches, checkpoints and reports.

An atomic write goes to a temporary sibling, fsynced, then renamed over the destination: a reader sees
the old file or the new one, never half of one. Reading (:func:`open_text`) turns a missing file, bytes
that are not UTF-8 and a damaged gzip stream into :class:`DataError` s naming the file (and line).
:class:`DataError` lives here, the lowest layer that reports bad input (re-exported by the data model).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib
import io
import json
import math
import os
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

# mkstemp creates files readable by their owner only; published files get the usual umask-based mode.
_UMASK = os.umask(0)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK


class DataError(ValueError):
    """Malformed input: ``str(err)`` (and ``repr``, which Hydra prints) is
    ``"<path>, line <n>, field '<field>': <reason>"`` with the parts that are known (lines are 1-based)."""

    def __init__(self, message: str, *, path: str | os.PathLike | None = None, line: int | None = None,
                 field: str | None = None):
        path = str(path) if path is not None else None
        self.path, self.line, self.field, self.reason = path, line, field, message
        where = [part for part, known in ((path, path), (f"line {line}", line), (f"field '{field}'", field))
                 if known is not None]
        super().__init__(f"{', '.join(where)}: {message}" if where else message)

    def located(self, *, path: str | os.PathLike | None = None, line: int | None = None, prefix: str = "") -> DataError:
        """A copy naming ``path`` and ``line`` where given, its field under ``prefix`` ("[3]" + "qid")."""
        field = self.field or prefix or None
        if self.field and prefix:
            field = f"{prefix}{'' if self.field.startswith('[') else '.'}{self.field}"
        return DataError(self.reason, path=path if path is not None else self.path,
                         line=line if line is not None else self.line, field=field)


class MissingFileError(DataError, FileNotFoundError):
    """A missing data file: a :class:`DataError` that ``except FileNotFoundError`` catches too."""


#: The name of an atomic writer's temporary sibling of ``name``: ``.<name>.<random>.tmp`` (:func:`atomic_open`,
#: :func:`atomic_directory`); :func:`is_temp_sibling` recognises one.
TEMP_SUFFIX = ".tmp"


def _temp_prefix(path: Path) -> str:
    return f".{path.name}."


def is_temp_sibling(name: str) -> bool:
    """Whether a file name is an atomic write in flight (or left by a crash): another process may be writing it
    right now, so a reader listing a folder must not take it for one of the folder's files."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary sibling of ``path`` for writing; on clean exit, fsync and rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    binary = "b" in mode
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(path), suffix=TEMP_SUFFIX)
    try:
        raw = os.fdopen(fd, "wb")
        # mtime=0 keeps gzip output byte-identical across runs (same seed, same bytes).
        gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if path.suffix == ".gz" else None
        stream: IO = raw if gz is None else gz
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


# What a damaged gzip stream raises: BadGzipFile (an OSError: bad header, CRC or length), EOFError
# (truncated: no end-of-stream marker), zlib.error (corrupt deflate data).
_GZIP_ERRORS = (OSError, EOFError, zlib.error)


class TextReader:
    """A strict UTF-8 reader of a plain or gzipped file (lines, CRLF read as LF, counted in :attr:`line`; a leading
    byte order mark skipped, else an id would start with U+FEFF):
    bad UTF-8 names its line and column, a damaged gzip stream the line it broke in."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        self.line = 0
        try:
            raw = open(path, "rb")
        except FileNotFoundError:
            raise MissingFileError("no such file", path=self.path) from None
        except IsADirectoryError:
            raise DataError("is a directory, expected a file", path=self.path) from None
        except OSError as err:
            raise DataError(f"cannot open ({err.strerror or err})", path=self.path) from None
        self._raw = raw
        self._stream: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if Path(path).suffix == ".gz" else raw

    def _gzip_error(self, err: BaseException, line: int | None) -> DataError:
        return DataError(f"corrupt or truncated gzip data ({type(err).__name__}: {err})", path=self.path, line=line)

    def _decode(self, data: bytes, first_line: int) -> str:
        if first_line == 1 and data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]  # a UTF-8 byte order mark (Windows editors write one) marks the encoding, not data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            line = first_line + data.count(b"\n", 0, err.start)
            column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
            raise DataError(f"not valid UTF-8 (byte {data[err.start]:#04x} at column {column})", path=self.path,
                            line=line) from None
        return text.replace("\r\n", "\n")

    def __iter__(self) -> Iterator[str]:
        while True:
            try:
                data = self._stream.readline()
            except _GZIP_ERRORS as err:
                raise self._gzip_error(err, self.line + 1) from None
            if not data:
                return
            self.line += 1
            yield self._decode(data, self.line)

    def read(self) -> str:
        """The whole (remaining) text."""
        try:
            data = self._stream.read()
        except _GZIP_ERRORS as err:
            raise self._gzip_error(err, None) from None
        text = self._decode(data, self.line + 1)
        self.line += data.count(b"\n")
        return text

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            self._raw.close()


def open_text(path: str | os.PathLike) -> contextlib.closing[TextReader]:
    """Open a UTF-8 text file for strict reading (``with open_text(path) as f``), gunzipping ``*.gz``."""
    return contextlib.closing(TextReader(path))


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling directory of ``path`` to fill; on clean exit it replaces ``path`` by rename
    (the old one moved aside, then deleted): a reader never sees a mix, a crash leaves ``path`` as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=_temp_prefix(path), suffix=TEMP_SUFFIX))
    try:
        os.chmod(tmp, 0o777 & ~_UMASK)  # mkdtemp makes it private; a saved model is meant to be shared
        yield tmp
        old = path.parent / f".{path.name}.old" if path.exists() else None
        if old is not None:
            if old.exists():
                shutil.rmtree(old)
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    """Hex sha256 of a file's bytes, read in ``chunk``-byte blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def read_json_dict(path: str | os.PathLike) -> dict | None:
    """The JSON object in ``path``, or None when the file is absent, torn or not an object (a state file's reader)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def json_safe(obj: Any) -> Any:
    """A JSON-serialisable copy of ``obj``: numpy -> Python, NaN/inf -> None, paths -> str, recursively."""
    if isinstance(obj, dict) or (hasattr(obj, "items") and hasattr(obj, "keys")):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if isinstance(obj, (np.bool_, np.integer)):
        return obj.item()
    if isinstance(obj, (np.floating, float)):  # np.longdouble's tolist() is itself: convert, never recurse
        return float(obj) if math.isfinite(obj) else None
    return str(obj) if isinstance(obj, Path) else obj


def optional_import(module: str, extra: str = "bench"):
    """Import an optional dependency, or raise an ImportError that says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"{module} is not installed: pip install {module} (or the project's '{extra}' extra: "
                          f"pip install -e '.[{extra}]')") from err
