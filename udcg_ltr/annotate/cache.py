"""A persistent, crash-safe, multi-process annotation cache: append-only JSONL segments.

Every writing process appends to **its own** ``seg-<time>-<pid>-<random>.jsonl`` segment (each batch in one
fsynced ``write``); reading merges all segments into an in-memory index, later lines winning field by field.
Why not SQLite: concurrent writers (Hydra jobs, a SLURM array) share no file and need no locking, where SQLite
serialises writers and its WAL needs shared memory that network file systems lack; a killed run loses nothing
it had fsynced; a torn last line is ignored until complete; every computation is one line, so "was anything
scored twice?" is answerable from the files. Values are validated (:func:`check_fields`) on write and read: a
bad line is rejected with a warning and its entry recomputed. Keys (:func:`cache_key`) hash all that shapes a
result (LLM, prompt version, task, question, passages, parameters): nothing is silently reused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from udcg_ltr.data.jsonl import non_finite_field
from udcg_ltr.data.schema import PROBABILITY_FIELDS, DataError, is_finite_number, is_probability
from udcg_ltr.io import atomic_open
from udcg_ltr.paths import cache_dir

log = logging.getLogger(__name__)

#: A segment's file name is ``SEGMENT_PREFIX<time>-<pid>-<random>SEGMENT_SUFFIX`` (written and globbed alike).
SEGMENT_PREFIX, SEGMENT_SUFFIX = "seg-", ".jsonl"


def _segment_name(tag: str) -> str:
    return f"{SEGMENT_PREFIX}{time.time_ns():020d}-{os.getpid()}-{tag}{SEGMENT_SUFFIX}"


def default_cache_root(llm_name: str) -> Path:
    """``<cache_dir()>/annotations/<safe name>``: the CLI, train.py and evaluate.py share it by default."""
    return cache_dir() / "annotations" / re.sub(r"[^A-Za-z0-9._-]+", "_", llm_name)


def open_cache(cache, llm_name: str) -> AnnotationCache | None:
    """``True``: the :func:`default_cache_root` cache; a path: a cache there; a cache as is; else ``None``."""
    if cache is None or cache is False:
        return None
    if cache is True:
        return AnnotationCache(default_cache_root(llm_name))
    return AnnotationCache(Path(cache)) if isinstance(cache, (str, os.PathLike)) else cache


def passages_digest(passages: Sequence[tuple[str, str]]) -> str:
    canonical = json.dumps([[t, x] for t, x in passages], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def cache_key(llm: str, prompt_version: str, task: str, question: str, passages: Sequence[tuple[str, str]],
              params: Mapping[str, Any] | None = None) -> str:
    blob = [llm, prompt_version, task, question, passages_digest(passages), dict(params or {})]
    canonical = json.dumps(blob, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def lookup(cache: AnnotationCache | None, keys: Sequence[str], field_name: str) -> list[dict | None]:
    """The cached entry of each key when it holds ``field_name``; ``None`` otherwise (or without a cache)."""
    entries = [None] * len(keys) if cache is None else [cache.get(k) for k in keys]
    return [e if e is not None and field_name in e else None for e in entries]


#: Stored field -> (is a value valid?, what is wrong with it); other fields: any JSON value but NaN / inf.
_FIELD_CHECKS: dict[str, tuple[Callable[[Any], bool], Callable[[Any], str]]] = {
    **dict.fromkeys(PROBABILITY_FIELDS, (is_probability,
                                         lambda v: f"probability {v!r:.40} is not a number in [0, 1]")),
    **dict.fromkeys(("n_prompt_tokens", "max_new_tokens", "mc_n"),
                    (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                     lambda v: f"count {v!r:.40} is not an integer >= 0")),
    **dict.fromkeys(("answer", "reply"), (lambda v: isinstance(v, str),
                                          lambda v: f"expected a string, got {type(v).__name__} {v!r:.40}")),
    "answer_logprob": (lambda v: is_finite_number(v) and v <= 0,
                       lambda v: f"log-probability {v!r:.40} is not a finite number <= 0"),
    "mc_answers": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                   lambda v: f"expected a list of strings, got {v!r:.40}"),
}
_ANY_FINITE = (lambda v: non_finite_field(v) is None, lambda v: "holds a NaN or infinite number")


def check_fields(fields: Mapping[str, Any]) -> None:
    """Raise :class:`DataError` (``field`` = the bad field) unless every field holds a valid value: a NaN
    or an infinity is not JSON, and a bad P(NO-RESPONSE) (Eq. 2) would flow into utilities and metrics."""
    for name, value in fields.items():
        valid, problem = _FIELD_CHECKS.get(name, _ANY_FINITE)
        if not valid(value):
            raise DataError(problem(value), field=name)


class AnnotationCache:
    """Append-only JSONL segments; ``fsync=False`` trades durability on power loss for speed on slow disks."""

    def __init__(self, root: str | os.PathLike, *, fsync: bool = True, read_only: bool = False):
        self.root, self.fsync, self.read_only = Path(root), fsync, read_only
        if not read_only:
            self.root.mkdir(parents=True, exist_ok=True)
        self._index: dict[str, dict[str, Any]] = {}
        self._offsets: dict[str, int] = {}
        self._line_numbers: dict[str, int] = {}  # complete lines read per segment (to name a bad line)
        #: lines read, duplicate_lines, corrupt_lines, invalid_lines, written (see :meth:`stats`)
        self._counts: Counter[str] = Counter()
        self._torn: dict[str, int] = {}
        self._segment: Path | None = None
        self._fh = None
        self.refresh()

    def segments(self) -> list[Path]:
        return sorted(self.root.glob(f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}")) if self.root.is_dir() else []

    def refresh(self) -> int:
        """Read whatever complete lines other writers appended since the last call; returns how many."""
        added, segments = 0, self.segments()
        for seg in segments:
            offset = self._offsets.get(seg.name, 0)
            try:
                with open(seg, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except FileNotFoundError:  # removed by a concurrent compact()
                continue
            end = data.rfind(b"\n") + 1  # only complete lines; a torn tail waits for its newline
            lineno = self._line_numbers.get(seg.name, 0)
            # split on b"\n" only: the writer ends lines with "\n", and JSON text may hold other line breaks
            for raw in data[:end].split(b"\n")[:-1]:
                lineno += 1
                if raw.strip():
                    added += self._ingest(raw, seg.name, lineno)
            self._line_numbers[seg.name] = lineno
            self._offsets[seg.name] = offset + end
            if end < len(data):
                self._torn[seg.name] = len(data) - end
            else:
                self._torn.pop(seg.name, None)
        for gone in set(self._offsets) - {seg.name for seg in segments}:
            for table in (self._offsets, self._torn, self._line_numbers):
                table.pop(gone, None)
        return added

    def _ingest(self, raw: bytes, segment: str, lineno: int) -> int:
        try:
            obj = json.loads(raw)
            key, fields = obj["k"], obj["v"]
            if not isinstance(key, str) or not isinstance(fields, dict):
                raise TypeError("bad entry")
        except (ValueError, KeyError, TypeError):
            self._counts["corrupt_lines"] += 1
            log.warning("annotation cache %s: skipping an unreadable line (segment %s, line %d)", self.root,
                        segment, lineno)
            return 0
        try:
            check_fields(fields)
        except DataError as err:
            # A corrupt value is not served: the entry is recomputed on demand and compact() drops the line.
            self._counts["invalid_lines"] += 1
            log.warning("annotation cache %s: rejecting a corrupt entry (segment %s, line %d, field %r: %s); "
                        "it will be recomputed", self.root, segment, lineno, err.field, err.reason)
            return 0
        return self._merge(key, fields)

    def _merge(self, key: str, fields: Mapping[str, Any]) -> int:
        """Merge one line into the index (later lines win field by field); 1 when the key is new."""
        self._counts["lines"] += 1
        if key in self._index:
            self._counts["duplicate_lines"] += 1
            self._index[key].update(fields)
            return 0
        self._index[key] = dict(fields)
        return 1

    def get(self, key: str) -> dict[str, Any] | None:
        return dict(entry) if (entry := self._index.get(key)) is not None else None

    def __contains__(self, key: str) -> bool:
        return key in self._index

    def __len__(self) -> int:
        return len(self._index)

    def keys(self) -> Iterable[str]:
        return self._index.keys()

    def stats(self) -> dict[str, int]:
        """``entries`` distinct keys, ``lines`` read, ``duplicate_lines`` (key already present: a computation
        repeated or an entry extended), ``corrupt_lines`` (not parseable), ``invalid_lines`` (rejected by
        :func:`check_fields`), ``torn_bytes`` of unfinished tails, ``segments``, ``written`` by this cache."""
        read = {k: self._counts[k] for k in ("lines", "duplicate_lines", "corrupt_lines", "invalid_lines")}
        return {"entries": len(self._index), **read, "torn_bytes": sum(self._torn.values()),
                "segments": len(self._offsets), "written": self._counts["written"]}

    def _open_segment(self):
        if self.read_only:
            raise PermissionError(f"annotation cache {self.root} is read-only")
        if self._fh is None:
            self.root.mkdir(parents=True, exist_ok=True)
            self._segment = self.root / _segment_name(secrets.token_hex(4))
            self._fh = open(self._segment, "xb")  # "x": a segment belongs to exactly one writer
        return self._fh

    def put_many(self, entries: Iterable[tuple[str, Mapping[str, Any], Mapping[str, Any] | None]]) -> int:
        """Append ``(key, fields, meta)`` entries durably (one write, flush, fsync); returns how many.
        A field failing :func:`check_fields` raises :class:`DataError`: nothing of the batch is written."""
        lines, staged = [], []
        now = round(time.time(), 3)
        for key, fields, meta in entries:
            try:
                check_fields(fields)
            except DataError as err:
                raise DataError(f"refusing to cache {err.reason} (key {key[:12]}...)", path=str(self.root),
                                field=err.field) from None
            record = {"k": key, "v": dict(fields), "t": now, **({"m": dict(meta)} if meta else {})}
            lines.append(json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
            staged.append((key, fields))
        if not lines:
            return 0
        fh = self._open_segment()
        fh.write(("\n".join(lines) + "\n").encode("utf-8"))
        fh.flush()
        if self.fsync:
            os.fsync(fh.fileno())
        # Our own lines are indexed directly; advance our offset past them so refresh() skips them.
        self._offsets[self._segment.name] = fh.tell()
        self._line_numbers[self._segment.name] = self._line_numbers.get(self._segment.name, 0) + len(lines)
        for key, fields in staged:
            self._merge(key, fields)
        self._counts["written"] += len(lines)
        return len(lines)

    def put(self, key: str, fields: Mapping[str, Any], meta: Mapping[str, Any] | None = None) -> None:
        self.put_many([(key, fields, meta)])

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> AnnotationCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def compact(self) -> Path | None:
        """Rewrite every valid entry into one new segment and delete every segment read (with torn tails and
        rejected lines); run it when no other process writes the cache (a live writer's file is deleted)."""
        self.refresh()
        self.close()
        # only the segments just read: one created since then is left for the next compaction
        segments = [self.root / name for name in self._offsets]
        for name, size in sorted(self._torn.items()):
            log.warning("annotation cache %s: compact() drops a torn line of %d bytes at the end of segment %s "
                        "(line %d)", self.root, size, name, self._line_numbers.get(name, 0) + 1)
        if not self._index and not segments:
            return None
        dest = self.root / _segment_name("compact")
        with atomic_open(dest, "w") as f:
            for key, fields in self._index.items():
                f.write(json.dumps({"k": key, "v": fields}, ensure_ascii=False, separators=(",", ":"),
                                   allow_nan=False) + "\n")
        for path in set(segments) - {dest}:
            path.unlink(missing_ok=True)
        self._offsets = {dest.name: dest.stat().st_size}
        self._line_numbers = {dest.name: len(self._index)}
        self._torn = {}
        self._counts = Counter(lines=len(self._index), written=self._counts["written"])
        return dest
