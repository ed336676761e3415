"""A persistent, crash-safe, multi-process annotation cache: append-only JSONL segments.

Layout: one folder per cache (the CLI uses ``cache_dir()/annotations/<llm name>``) holding
``seg-<time>-<pid>-<random>.jsonl`` files. Every process that writes opens **its own** segment and
appends one JSON line per computed entry; each batch is written with one ``write`` call, then
flushed and fsynced, before the next batch starts. Reading merges all segments.

Why segments rather than SQLite (WAL): the guarantees the annotator needs are simple (append,
never update in place) and segments give them with no locking at all:

* a killed run loses nothing it had fsynced, and a restarted run appends to a new segment;
* concurrent writers (several Hydra jobs, a SLURM array) never contend: there is no shared file,
  no lock, nothing to corrupt -- SQLite serialises writers and its WAL mode needs shared memory,
  which network file systems (where a cluster's cache usually lives) do not provide;
* readers in other processes may see a segment mid-append: a last line without its newline is
  *torn* and ignored (re-read on the next :meth:`AnnotationCache.refresh`), a complete line that
  does not parse is counted and skipped;
* values are validated when read (:func:`check_fields`): a line whose fields break their type or
  range (a NaN or out-of-range ``p_no_response``, a negative token count, a non-string answer) is
  *rejected as corrupt*: a warning names the segment and line, the line is left out of the index,
  so the entry is recomputed by the next run that asks for it, and :meth:`compact` drops it. Bad
  values never reach an output; :meth:`put_many` refuses them before they reach the disk;
* every computation is one line, so "was anything scored twice?" is answerable from the files
  (:meth:`AnnotationCache.stats`), and the files are greppable and easy to ship.

Lookups are served from an in-memory index (key -> merged fields) built at open; :meth:`compact`
rewrites all live entries into a single segment atomically when segments pile up: one line per
key, torn tails and rejected lines dropped.

Keys (:func:`cache_key`) hash the LLM name, the prompt version, the task (``score``,
``answer_logprob``, ``mc`` ...), the question, the sha256 of the passages' titles and texts, and
task parameters: change any of them and the entry is recomputed, never silently reused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from udcg_ltr.data.schema import DataError
from udcg_ltr.io import atomic_open
from udcg_ltr.paths import cache_dir

log = logging.getLogger(__name__)

SEGMENT_PREFIX = "seg-"
SEGMENT_SUFFIX = ".jsonl"


def default_cache_root(llm_name: str) -> Path:
    """The default cache folder of an LLM: ``<cache_dir()>/annotations/<name with / and spaces made safe>``.

    The annotation CLI, train.py and evaluate.py all default to it, so annotations made by one are
    reused by the others.
    """
    return cache_dir() / "annotations" / re.sub(r"[^A-Za-z0-9._-]+", "_", llm_name)


def open_cache(cache, llm_name: str) -> AnnotationCache | None:
    """The annotation cache a job or study asked for: ``True`` -> :func:`default_cache_root` of ``llm_name``;
    a path -> a cache there; a cache object as is; ``None`` / ``False`` -> no cache."""
    if cache is None or cache is False:
        return None
    if cache is True:
        return AnnotationCache(default_cache_root(llm_name))
    if isinstance(cache, (str, os.PathLike)):
        return AnnotationCache(Path(cache))
    return cache


def passages_digest(passages: Sequence[tuple[str, str]]) -> str:
    """sha256 of the passages' (title, text) pairs, in prompt order."""
    canonical = json.dumps([[t, x] for t, x in passages], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def cache_key(llm: str, prompt_version: str, task: str, question: str, passages: Sequence[tuple[str, str]],
              params: Mapping[str, Any] | None = None) -> str:
    """The cache key of one computation (a sha256 hex string)."""
    canonical = json.dumps([llm, prompt_version, task, question, passages_digest(passages),
                            dict(sorted((params or {}).items()))],
                           ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


#: Fields the annotator stores, by kind: probabilities in [0, 1], counts (integers >= 0), texts,
#: log-probabilities (finite, <= 0), lists of texts. Other fields may hold any JSON value.
PROBABILITY_FIELDS = ("p_no_response", "p_no_response_mc")
COUNT_FIELDS = ("n_prompt_tokens", "max_new_tokens", "mc_n")
TEXT_FIELDS = ("answer", "reply")
LOGPROB_FIELDS = ("answer_logprob",)
TEXT_LIST_FIELDS = ("mc_answers",)


def _non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(_non_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_non_finite(v) for v in value)
    return False


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_fields(fields: Mapping[str, Any]) -> None:
    """Raise :class:`DataError` (``field`` = the bad field) unless every field holds a valid value.

    Probabilities (P(NO-RESPONSE), UDCG paper Eq. 2) must be finite numbers in [0, 1], counts
    integers >= 0, answers strings, log-likelihoods finite and <= 0; no number anywhere may be NaN
    or infinite (they are not JSON, and would flow into utilities and metrics).
    """
    for name, value in fields.items():
        if name in PROBABILITY_FIELDS:
            if not _is_number(value) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
                raise DataError(f"probability {value!r:.40} is not a number in [0, 1]", field=name)
        elif name in COUNT_FIELDS:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise DataError(f"count {value!r:.40} is not an integer >= 0", field=name)
        elif name in TEXT_FIELDS:
            if not isinstance(value, str):
                raise DataError(f"expected a string, got {type(value).__name__} {value!r:.40}", field=name)
        elif name in LOGPROB_FIELDS:
            if not _is_number(value) or not math.isfinite(value) or value > 0:
                raise DataError(f"log-probability {value!r:.40} is not a finite number <= 0", field=name)
        elif name in TEXT_LIST_FIELDS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise DataError(f"expected a list of strings, got {value!r:.40}", field=name)
        elif _non_finite(value):
            raise DataError("holds a NaN or infinite number", field=name)


class AnnotationCache:
    """Append-only JSONL segment store (see the module docstring).

    ``get(key)`` returns the merged fields of a key (later lines win field by field) or ``None``;
    ``put_many([(key, fields, meta), ...])`` appends one batch durably. ``fsync=False`` trades
    durability on power loss (not on a killed process) for speed on slow disks.
    """

    def __init__(self, root: str | os.PathLike, *, fsync: bool = True, read_only: bool = False):
        self.root = Path(root)
        self.fsync = fsync
        self.read_only = read_only
        if not read_only:
            self.root.mkdir(parents=True, exist_ok=True)
        self._index: dict[str, dict[str, Any]] = {}
        self._offsets: dict[str, int] = {}
        self._line_numbers: dict[str, int] = {}  # complete lines read per segment (to name a bad line)
        self._lines = 0
        self._keys_seen_twice = 0
        self._corrupt = 0
        self._invalid = 0
        self._torn: dict[str, int] = {}
        self._segment: Path | None = None
        self._fh = None
        self._written = 0
        self.refresh()

    # ---- reading ------------------------------------------------------------------------
    def segments(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir()
                      if p.name.startswith(SEGMENT_PREFIX) and p.name.endswith(SEGMENT_SUFFIX))

    def refresh(self) -> int:
        """Read whatever complete lines other writers appended since the last call; returns how many."""
        added = 0
        present = set()
        for seg in self.segments():
            present.add(seg.name)
            offset = self._offsets.get(seg.name, 0)
            try:
                with open(seg, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except FileNotFoundError:  # removed by a concurrent compact()
                continue
            if not data:
                self._torn.pop(seg.name, None)
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
        for gone in set(self._offsets) - present:
            self._offsets.pop(gone, None)
            self._torn.pop(gone, None)
            self._line_numbers.pop(gone, None)
        return added

    def _ingest(self, raw: bytes, segment: str, lineno: int) -> int:
        try:
            obj = json.loads(raw)
            key, fields = obj["k"], obj["v"]
            if not isinstance(key, str) or not isinstance(fields, dict):
                raise TypeError("bad entry")
        except (ValueError, KeyError, TypeError):
            self._corrupt += 1
            log.warning("annotation cache %s: skipping an unreadable line (segment %s, line %d)", self.root,
                        segment, lineno)
            return 0
        try:
            check_fields(fields)
        except DataError as err:
            # A corrupt value is not served: the entry is recomputed on demand and compact() drops the line.
            self._invalid += 1
            log.warning("annotation cache %s: rejecting a corrupt entry (segment %s, line %d, field %r: %s); "
                        "it will be recomputed", self.root, segment, lineno, err.field, err.reason)
            return 0
        self._lines += 1
        if key in self._index:
            self._keys_seen_twice += 1
            self._index[key].update(fields)
            return 0
        self._index[key] = dict(fields)
        return 1

    def get(self, key: str) -> dict[str, Any] | None:
        entry = self._index.get(key)
        return dict(entry) if entry is not None else None

    def __contains__(self, key: str) -> bool:
        return key in self._index

    def __len__(self) -> int:
        return len(self._index)

    def keys(self) -> Iterable[str]:
        return self._index.keys()

    def stats(self) -> dict[str, int]:
        """``entries`` distinct keys, ``lines`` entries read, ``duplicate_lines`` lines whose key was
        already present (a computation repeated or an entry extended), ``corrupt_lines`` (not
        parseable), ``invalid_lines`` (parseable, with a value rejected by :func:`check_fields`),
        ``torn_bytes`` of unfinished tails, ``segments``, ``written`` lines by this object."""
        return {"entries": len(self._index), "lines": self._lines, "duplicate_lines": self._keys_seen_twice,
                "corrupt_lines": self._corrupt, "invalid_lines": self._invalid,
                "torn_bytes": sum(self._torn.values()), "segments": len(self._offsets), "written": self._written}

    # ---- writing ------------------------------------------------------------------------
    def _open_segment(self):
        if self.read_only:
            raise PermissionError(f"annotation cache {self.root} is read-only")
        if self._fh is None:
            self.root.mkdir(parents=True, exist_ok=True)
            name = f"{SEGMENT_PREFIX}{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(4)}{SEGMENT_SUFFIX}"
            self._segment = self.root / name
            # "x": a segment belongs to exactly one writer.
            self._fh = open(self._segment, "xb")
        return self._fh

    def put_many(self, entries: Iterable[tuple[str, Mapping[str, Any], Mapping[str, Any] | None]]) -> int:
        """Append a batch of ``(key, fields, meta)`` durably (one write, flush, fsync); returns its size.

        Fields are checked first (:func:`check_fields`): a NaN or out-of-range value raises
        :class:`DataError` and nothing of the batch is written.
        """
        lines = []
        now = round(time.time(), 3)
        staged = []
        for key, fields, meta in entries:
            try:
                check_fields(fields)
            except DataError as err:
                raise DataError(f"refusing to cache {err.reason} (key {key[:12]}...)", path=str(self.root),
                                field=err.field) from None
            record = {"k": key, "v": dict(fields), "t": now}
            if meta:
                record["m"] = dict(meta)
            lines.append(json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
            staged.append((key, dict(fields)))
        if not lines:
            return 0
        fh = self._open_segment()
        fh.write(("\n".join(lines) + "\n").encode("utf-8"))
        fh.flush()
        if self.fsync:
            os.fsync(fh.fileno())
        # Our own lines are indexed directly; advance our offset past them so refresh() skips them.
        assert self._segment is not None
        self._offsets[self._segment.name] = fh.tell()
        self._line_numbers[self._segment.name] = self._line_numbers.get(self._segment.name, 0) + len(lines)
        for key, fields in staged:
            self._lines += 1
            if key in self._index:
                self._keys_seen_twice += 1
                self._index[key].update(fields)
            else:
                self._index[key] = fields
        self._written += len(lines)
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
        """Rewrite every valid entry into one new segment (atomically) and delete every segment read.

        The result holds exactly one line per key (the merged fields). A torn tail -- a line a
        killed writer left without its newline -- is dropped with a warning naming the segment:
        its complete lines are in the new segment, and the segment itself is deleted, so nothing
        survives twice. Lines rejected as unreadable or corrupt are dropped too.

        Run it when no other process is writing the cache: a live writer's open segment would be
        deleted under it (and a writer that is mid-line would lose that line).
        """
        self.refresh()
        self.close()
        # only the segments just read: one created since then is left for the next compaction
        segments = [self.root / name for name in self._offsets]
        for name, size in sorted(self._torn.items()):
            log.warning("annotation cache %s: compact() drops a torn line of %d bytes at the end of segment %s "
                        "(line %d)", self.root, size, name, self._line_numbers.get(name, 0) + 1)
        if not self._index and not segments:
            return None
        name = f"{SEGMENT_PREFIX}{time.time_ns():020d}-{os.getpid()}-compact{SEGMENT_SUFFIX}"
        dest = self.root / name
        with atomic_open(dest, "w") as f:
            for key, fields in self._index.items():
                f.write(json.dumps({"k": key, "v": fields}, ensure_ascii=False, separators=(",", ":"),
                                   allow_nan=False) + "\n")
        for path in segments:
            if path != dest:
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass
        self._offsets = {dest.name: dest.stat().st_size}
        self._line_numbers = {dest.name: len(self._index)}
        self._torn = {}
        self._lines = len(self._index)
        self._keys_seen_twice = 0
        self._corrupt = 0
        self._invalid = 0
        return dest
