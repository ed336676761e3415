"""What an LLM stage will cost, said before it starts, from a rate measured on this machine.

Every stage that prompts an LLM goes through :class:`.CachedScorer` (single-passage annotation,
ANSWER_PROB, end-to-end contexts): before the first LLM call it knows how many prompts miss the cache, so it
announces them (single-passage prompts and multi-passage contexts apart) with an estimate of the time:

    qwen2.5-coder-0.5b-instruct: 2,946 single-passage prompts to compute (0 cached), about 3.4 h at
    0.24 prompts/s measured on this machine

The rate is measured, never guessed: after each real batch the scorer adds ``prompts / seconds`` to a
:class:`RateBook`, one record per (LLM, precision, device, kind, mode), kept in ``llm_rates.json`` beside the
annotation cache's segments (written atomically; a cache without a folder or a read-only one keeps its rates
in memory for the process). Without a measurement the line says so and the rate is reported after the first
batch. A handful of prompts (< :data:`ANNOUNCE_MIN_PROMPTS`) is not announced.

Lines go to the ``udcg_ltr.annotate.cost`` logger when logging is configured (Hydra jobs), else to stderr
(the annotate CLI, a notebook): stdout stays machine-read.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from udcg_ltr.io import atomic_write_json

log = logging.getLogger(__name__)

#: Fewer prompts to compute than this: no announcement (a debug line only).
ANNOUNCE_MIN_PROMPTS = 10
#: The rates file's name in an annotation cache root (the cache reads only ``seg-*.jsonl`` there).
RATES_FILE = "llm_rates.json"
#: A record keeps about this many recent prompts' worth of measurement (older ones are scaled down).
RATE_WINDOW = 2000
#: Rates are written at the first measured batch, then at most this often, and when a stage ends.
FLUSH_SECONDS = 30.0

#: Prompt kind -> how an announcement names its prompts.
KIND_LABELS = {"single": "single-passage prompts", "context": "multi-passage contexts",
               "answer_prob": "ANSWER_PROB passages", "mc": "Monte-Carlo passages"}


def prompt_kind(n_passages: int) -> str:
    """``single`` for a prompt with at most one passage, ``context`` for more (a 1-passage context is the same
    prompt, and the same cache entry, as the single-passage annotation)."""
    return "single" if n_passages <= 1 else "context"


def device_label(scorer: Any) -> str:
    """The device a scorer runs on, named so that rates of different machines' hardware stay apart: the GPU's
    name on CUDA, the thread count on a CPU (a 1-thread run is not a 16-thread one)."""
    device = str(getattr(scorer, "device", "cpu") or "cpu")
    torch = sys.modules.get("torch")  # never imported here: a scorer that runs torch has imported it
    if device.startswith("cuda") and torch is not None:
        try:
            return f"{device}:{torch.cuda.get_device_name(torch.device(device))}"
        except Exception:  # noqa: BLE001 - a label only; the device string is enough
            return device
    if device == "cpu":
        threads = torch.get_num_threads() if torch is not None else os.cpu_count()
        return f"cpu/{threads}t"
    return device


def rate_key(llm: str, precision: str, device: str, kind: str, generate: bool) -> str:
    """One rate record per LLM, precision, device, prompt kind and mode (generating an answer costs more than
    scoring the first token)."""
    return "|".join((llm, precision, device, kind, "generate" if generate else "score"))


def format_duration(seconds: float) -> str:
    """``40 s``, ``12 min``, ``3.4 h``, ``2.1 days``."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def format_rate(rate: float) -> str:
    """Prompts per second with two significant digits (``0.24``, ``3.1``, ``120``)."""
    if rate >= 100:
        return f"{rate:,.0f}"
    return f"{rate:.2g}" if rate >= 1 else f"{rate:.2f}" if rate >= 0.01 else f"{rate:.2g}"


def announce_cost(n_prompts: int, kind: str, llm: str, rate: float | None, *, cached: int = 0,
                  min_prompts: int = ANNOUNCE_MIN_PROMPTS) -> str | None:
    """The line announcing ``n_prompts`` prompts of ``kind`` to compute (``cached`` served by the cache) at
    ``rate`` prompts/s (``None``: not measured yet), emitted and returned; ``None`` (nothing emitted) when
    fewer than ``min_prompts`` are to compute. Nothing to compute: a short line at the logger only."""
    label = KIND_LABELS.get(kind, f"{kind} prompts")
    if n_prompts <= 0:
        if cached >= min_prompts:
            log.info("%s: all %s %s cached, nothing to compute", llm, f"{cached:,}", label)
        return None
    if n_prompts < min_prompts:
        log.debug("%s: %d %s to compute (%d cached)", llm, n_prompts, label, cached)
        return None
    head = f"{llm}: {n_prompts:,} {label} to compute ({cached:,} cached), "
    if rate is None or not rate > 0:
        line = head + "rate not measured yet on this machine (reported after the first batch)"
    else:
        line = head + f"about {format_duration(n_prompts / rate)} at {format_rate(rate)} prompts/s measured on " \
                      "this machine"
    emit(line)
    return line


def emit(line: str) -> None:
    """To the logger when a handler will show it (logging configured), else to stderr."""
    if log.isEnabledFor(logging.INFO) and log.hasHandlers():
        log.info(line)
    else:
        print(line, file=sys.stderr, flush=True)


def _valid_record(rec: Any) -> bool:
    return (isinstance(rec, dict) and all(isinstance(rec.get(f), (int, float)) and not isinstance(rec.get(f), bool)
                                          and math.isfinite(rec[f]) and rec[f] > 0 for f in ("prompts", "seconds")))


class RateBook:
    """Measured rates, ``key -> {"prompts", "seconds", "rate", "updated"}``; ``path=None``: in memory only."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = None if path is None else Path(path)
        self.records: dict[str, dict[str, Any]] = self._read()
        self._dirty: set[str] = set()
        self._flushed_at = -math.inf

    def _read(self, *, quiet: bool = False) -> dict[str, dict[str, Any]]:
        if self.path is None or not self.path.is_file():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("expected a JSON object")
        except (OSError, ValueError) as err:
            if not quiet:
                log.warning("LLM rates %s unreadable (%s): rates will be measured again", self.path, err)
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and _valid_record(v)}

    def rate(self, key: str) -> float | None:
        rec = self.records.get(key)
        return None if rec is None else rec["prompts"] / rec["seconds"]

    def add(self, key: str, prompts: int, seconds: float) -> float:
        """Add one measured batch; returns the record's rate. Older measurement fades beyond ``RATE_WINDOW``."""
        rec = self.records.get(key) or {"prompts": 0, "seconds": 0.0}
        n, s = rec["prompts"] + prompts, rec["seconds"] + max(float(seconds), 1e-9)
        if n > RATE_WINDOW:
            n, s = RATE_WINDOW, s * RATE_WINDOW / n
        self.records[key] = {"prompts": n, "seconds": s, "rate": n / s,
                             "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        self._dirty.add(key)
        return n / s

    def flush(self, *, force: bool = False) -> None:
        """Write this book's new records over the file's (another process's records are kept); at most every
        ``FLUSH_SECONDS`` unless ``force``. A failed write warns: a rate is never worth failing a stage."""
        if self.path is None or not self._dirty or (not force and time.monotonic() - self._flushed_at < FLUSH_SECONDS):
            return
        merged = {**self._read(quiet=True), **{k: self.records[k] for k in self._dirty}}
        try:
            atomic_write_json(self.path, merged)
        except OSError as err:
            log.warning("could not write LLM rates %s: %s", self.path, err)
        self.records.update(merged)
        self._dirty.clear()
        self._flushed_at = time.monotonic()


_BOOKS: dict[Path | None, RateBook] = {}


def rate_book(cache: Any) -> RateBook:
    """The process's :class:`RateBook` for an annotation cache (its root's ``llm_rates.json``); a cache that is
    ``None`` or read-only shares one in-memory book."""
    root = getattr(cache, "root", None)
    path = None if root is None or getattr(cache, "read_only", False) else Path(root) / RATES_FILE
    if path not in _BOOKS:
        _BOOKS[path] = RateBook(path)
    return _BOOKS[path]


class CostTracker:
    """One stage's prompts to compute, announced once and measured batch by batch.

    ``plan(kinds_todo, kinds_cached)`` announces; ``measured(kinds, seconds)`` records a batch (a batch mixing
    kinds is not measured: its time cannot be split between them), reports a kind's first measured rate when
    none was known at the announcement, and writes the book now and then; ``close()`` writes it."""

    def __init__(self, llm: str, precision: str, device: str, book: RateBook, *, generate: bool,
                 min_prompts: int = ANNOUNCE_MIN_PROMPTS):
        self.llm, self.precision, self.device, self.book = llm, precision, device, book
        self.generate, self.min_prompts = generate, min_prompts
        self.remaining: dict[str, int] = {}
        self._unmeasured: set[str] = set()
        self.lines: list[str] = []

    def key(self, kind: str) -> str:
        return rate_key(self.llm, self.precision, self.device, kind, self.generate)

    def plan(self, todo: Iterable[str], cached: Iterable[str] = ()) -> list[str]:
        """Announce the prompts to compute (their kinds) and those cached; returns the lines emitted."""
        counts: dict[str, list[int]] = {}
        for kind in todo:
            counts.setdefault(kind, [0, 0])[0] += 1
        for kind in cached:
            counts.setdefault(kind, [0, 0])[1] += 1
        lines = []
        for kind in sorted(counts, key=lambda k: list(KIND_LABELS).index(k) if k in KIND_LABELS else 99):
            n_todo, n_cached = counts[kind]
            rate = self.book.rate(self.key(kind))
            if (line := announce_cost(n_todo, kind, self.llm, rate, cached=n_cached,
                                      min_prompts=self.min_prompts)) is not None:
                lines.append(line)
                if rate is None:
                    self._unmeasured.add(kind)
            self.remaining[kind] = self.remaining.get(kind, 0) + n_todo
        self.lines.extend(lines)
        return lines

    def measured(self, kinds: Sequence[str], seconds: float) -> None:
        if not kinds:
            return
        for kind in kinds:
            self.remaining[kind] = max(0, self.remaining.get(kind, 0) - 1)
        if len(set(kinds)) != 1 or not seconds > 0:
            return
        kind = kinds[0]
        rate = self.book.add(self.key(kind), len(kinds), seconds)
        if kind in self._unmeasured:
            self._unmeasured.discard(kind)
            left = self.remaining.get(kind, 0)
            line = (f"{self.llm}: {format_rate(rate)} {KIND_LABELS.get(kind, kind + ' prompts')}/s measured over the "
                    f"first batch; about {format_duration(left / rate)} for the {left:,} left")
            self.lines.append(line)
            emit(line)
            self.book.flush(force=True)
        else:
            self.book.flush()

    def close(self) -> None:
        self.book.flush(force=True)


class BatchClock:
    """Seconds since the last tick (the first tick: since construction)."""

    def __init__(self):
        self._t = time.perf_counter()

    def tick(self) -> float:
        now = time.perf_counter()
        dt, self._t = now - self._t, now
        return dt
