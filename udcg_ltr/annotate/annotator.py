"""Annotating query records with an LLM, through the persistent cache.

:class:`CachedScorer` puts a scorer behind an :class:`.AnnotationCache`: cached prompts cost nothing, missing
ones are scored in batches, each fsynced to the cache before the next starts (a killed run resumes where it
stopped; nothing is scored twice). :func:`annotate_records` fills ``Passage.annotations[scorer.name]`` for
every passage (alone with the question, as the UDCG paper's utility needs) with the fields asked for:
``p_no_response`` (P(first token of NO-RESPONSE) at the first answer position, Eq. 2), ``answer_alone`` (the
greedy answer), the baselines' labels (:mod:`.baselines`: ``erag_em/f1/contains``, ``answer_logprob``,
``p_no_response_mc``), ``n_prompt_tokens`` and ``prompt_version`` (the prompt configuration's hash).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from udcg_ltr.annotate.baselines import ERAG_FIELDS, MonteCarloConfig, erag_labels, monte_carlo_p_no_response
from udcg_ltr.annotate.cache import AnnotationCache, cache_key, lookup
from udcg_ltr.annotate.cost import BatchClock, CostTracker, device_label, prompt_kind, rate_book
from udcg_ltr.annotate.prompts import PromptConfig, PromptItem, ScoreResult
from udcg_ltr.batching import progress_bar
from udcg_ltr.data.schema import DataError, QueryRecord
from udcg_ltr.text import distinct_answers

log = logging.getLogger(__name__)

#: Every field :func:`annotate_records` knows how to fill.
KNOWN_FIELDS = ("p_no_response", "answer_alone", *ERAG_FIELDS, "erag", "answer_logprob", "p_no_response_mc")


@dataclass
class AnnotationStats:
    """How much work an annotation run did: LLM computations vs cache hits, per task."""

    passages: int = 0
    computed: int = 0
    cached: int = 0
    by_task: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, task: str, computed: int, cached: int) -> None:
        slot = self.by_task.setdefault(task, {"computed": 0, "cached": 0})
        slot["computed"] += computed
        slot["cached"] += cached
        self.computed += computed
        self.cached += cached

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def precision_label(scorer) -> str:
    """The scorer's numerics as the cache keys them (dtype, fast mode, exact tail)."""
    dtype = str(getattr(scorer, "dtype", "float32")).replace("torch.", "")
    if not (quantize := getattr(scorer, "quantize", None)):
        return dtype
    tail = getattr(scorer, "exact_tail", None)
    return f"{dtype}+{quantize}" + (f"+tail{tail}" if tail is not None and "bf16" in str(quantize) else "")


class CachedScorer:
    """An LLM scorer whose results go through an :class:`AnnotationCache` (``cache=None``: no cache)."""

    def __init__(self, scorer, cache: AnnotationCache | None = None):
        self.scorer, self.cache = scorer, cache
        #: Per task (``stats.by_task``), prompts computed by the LLM and prompts served by the cache.
        self.stats = AnnotationStats()

    @property
    def name(self) -> str:
        return self.scorer.name

    @property
    def prompt_version(self) -> str:
        return self.scorer.prompt_version

    def _precision(self) -> str:
        return precision_label(self.scorer)

    def key(self, task: str, item: PromptItem, params: dict[str, Any] | None = None) -> str:
        return cache_key(self.name, self.prompt_version, task, item.question, item.passages,
                         {"precision": self._precision(), **(params or {})})

    def _meta(self, task: str, item: PromptItem) -> dict[str, Any]:
        return {"llm": self.name, "prompt_version": self.prompt_version, "task": task,
                "question": item.question[:200], "n_passages": len(item.passages)}

    def cost_tracker(self, *, generate: bool) -> CostTracker:
        """A :class:`.CostTracker` for this LLM, precision and device, on the rates beside the cache."""
        return CostTracker(self.name, self._precision(), device_label(self.scorer), rate_book(self.cache),
                           generate=generate)

    def pending(self, items: Sequence[PromptItem], *, generate: bool = False) -> tuple[list[int], list[int]]:
        """``(todo, cached)``: indices of the items :meth:`score` would compute (a prompt repeated in ``items``
        once) and of those the cache answers."""
        keys = [self.key("score", it) for it in items]
        todo: dict[str, int] = {}
        cached = []
        for i, entry in enumerate(lookup(self.cache, keys, "p_no_response")):
            if self._usable(entry, generate):
                cached.append(i)
            else:
                todo.setdefault(keys[i], i)
        return list(todo.values()), cached

    def _usable(self, entry: dict | None, generate: bool) -> bool:
        max_new = int(getattr(self.scorer, "max_new_tokens", 0))
        answered = entry is not None and "answer" in entry and entry.get("max_new_tokens") == max_new
        return entry is not None and (answered or not generate)

    def score(self, items: Sequence[PromptItem], *, generate: bool = False, progress: bool | None = None,
              tracker: CostTracker | None = None) -> list[ScoreResult]:
        """Like ``LLMScorer.score``; cached entries are reused (an entry without an answer, or with
        one generated under another ``max_new_tokens``, is recomputed when ``generate``). Before the first
        LLM call the prompts to compute are announced with an estimate (:mod:`.cost`), unless a caller
        scoring in chunks passes its own ``tracker`` (it announced the whole stage); each batch's rate is
        recorded."""
        items = list(items)
        max_new = int(getattr(self.scorer, "max_new_tokens", 0))
        keys = [self.key("score", it) for it in items]
        results: list[ScoreResult | None] = [None] * len(items)
        first: dict[str, int] = {}  # a prompt repeated within the call is computed once
        for i, entry in enumerate(lookup(self.cache, keys, "p_no_response")):
            if self._usable(entry, generate):
                results[i] = ScoreResult(float(entry["p_no_response"]), entry.get("answer"),
                                         int(entry.get("n_prompt_tokens", 0)))
            else:
                first.setdefault(keys[i], i)
        todo = list(first.values())
        kinds = [prompt_kind(len(it.passages)) for it in items]
        own = tracker is None
        if own:
            tracker = self.cost_tracker(generate=generate)
            tracker.plan([kinds[i] for i in todo], [kinds[i] for i, r in enumerate(results) if r is not None])
        clock = BatchClock()

        def persist(batch: list[int], batch_results: list[ScoreResult]) -> None:
            tracker.measured([kinds[todo[j]] for j in batch], clock.tick())
            rows = []
            for j, r in zip(batch, batch_results):
                i = todo[j]
                results[i] = r
                fields: dict[str, Any] = {"p_no_response": r.p_no_response, "n_prompt_tokens": r.n_prompt_tokens}
                if r.answer is not None:
                    fields.update(answer=r.answer, max_new_tokens=max_new)
                rows.append((keys[i], fields, self._meta("score", items[i])))
            if self.cache is not None:
                self.cache.put_many(rows)

        try:
            if todo:
                self.scorer.score([items[i] for i in todo], generate=generate, progress=progress, on_batch=persist)
        finally:
            if own:
                tracker.close()
        results = [results[first[keys[i]]] if r is None else r for i, r in enumerate(results)]
        self.stats.add("score", len(todo), len(items) - len(todo))
        return results  # type: ignore[return-value]

    def answer_logprob(self, items: Sequence[PromptItem], golds: Sequence[Sequence[str]], *,
                       progress: bool | None = None) -> list[float | None]:
        """Max over each item's gold answers of the teacher-forced log-likelihood (``None`` without any)."""
        task, items = "answer_logprob", list(items)
        golds = [distinct_answers(g) for g in golds]  # one spelling per normalised answer
        keys = [self.key(task, it, {"answers": g}) for it, g in zip(items, golds)]
        found = lookup(self.cache, keys, task)
        out: list[float | None] = [None if e is None else e[task] for e in found]
        pairs = [(i, a) for i, (e, g) in enumerate(zip(found, golds)) if e is None for a in g]
        todo = sorted({i for i, _ in pairs})
        chunk = max(1, 8 * int(getattr(self.scorer, "batch_size", 8)))
        tracker = self.cost_tracker(generate=False)
        tracker.plan(["answer_prob"] * len(todo), ["answer_prob"] * sum(e is not None for e in found))
        clock = BatchClock()
        try:
            for start in range(0, len(todo), chunk):
                # One call per chunk (bucketing and prefix reuse across its pairs), persisted before the next.
                part = set(todo[start:start + chunk])
                sub = [(i, a) for i, a in pairs if i in part]
                values = self.scorer.answer_logprobs([items[i] for i, _ in sub], [a for _, a in sub],
                                                     progress=progress)
                for (i, _), v in zip(sub, values):
                    out[i] = max(float("-inf") if out[i] is None else out[i], v)
                tracker.measured(["answer_prob"] * len(part), clock.tick())
                if self.cache is not None:
                    self.cache.put_many([(keys[i], {task: out[i]}, self._meta(task, items[i])) for i in sorted(part)])
        finally:
            tracker.close()
        self.stats.add(task, len(todo), sum(e is not None for e in found))
        return out

    def p_no_response_mc(self, items: Sequence[PromptItem], config: MonteCarloConfig | None = None, *,
                         progress: bool | None = None) -> list[float]:
        """Share of abstentions among ``config.n`` sampled answers, per item (cached per item)."""
        config = config or MonteCarloConfig()
        items = list(items)
        params = {"n": config.n, "temperature": config.temperature, "seed": config.seed,
                  "max_new_tokens": config.max_new_tokens or getattr(self.scorer, "max_new_tokens", None)}
        keys = [self.key("mc", it, params) for it in items]
        found = lookup(self.cache, keys, "p_no_response_mc")
        out = [float("nan") if e is None else float(e["p_no_response_mc"]) for e in found]
        todo = [i for i, e in enumerate(found) if e is None]
        tracker = self.cost_tracker(generate=True)
        tracker.plan(["mc"] * len(todo), ["mc"] * (len(items) - len(todo)))
        clock = BatchClock()
        with progress_bar(len(todo), f"{self.name} Monte Carlo", progress in (None, True)) as bar:
            try:
                for i in todo:
                    # A per-prompt seed (from the key) keeps draws independent of order and batching.
                    seed = (int(keys[i][:8], 16) ^ int(config.seed)) & 0x7FFFFFFF
                    out[i], answers = monte_carlo_p_no_response(self.scorer, items[i], config, seed=seed)
                    tracker.measured(["mc"], clock.tick())
                    if self.cache is not None:
                        self.cache.put(keys[i], {"p_no_response_mc": out[i], "mc_n": config.n,
                                                 "mc_answers": answers}, self._meta("mc", items[i]))
                    bar.update(1)
            finally:
                tracker.close()
        self.stats.add("mc", len(todo), len(items) - len(todo))
        return out


class CacheMiss(RuntimeError):
    """A :class:`CacheOnlyScorer` was asked for a prompt that is not in the cache."""


class CacheOnlyScorer:
    """Stands in for an LLM whose answers are all cached (reproducing a study offline): it carries what
    :class:`CachedScorer` keys on, so ``LLMScorer`` entries are found; a miss raises :class:`CacheMiss`."""

    def __init__(self, name: str, *, prompt=None, prompt_version: str | None = None, dtype: str = "float32",
                 quantize: str | None = None, exact_tail: int | None = None, max_new_tokens: int = 24):
        self.name = name
        self.prompt = PromptConfig.from_dict(prompt)
        self.prompt_version = prompt_version or self.prompt.version()  # the version the cache keys use
        self.dtype, self.quantize, self.exact_tail = dtype, quantize, exact_tail
        self.max_new_tokens = int(max_new_tokens)

    def answer_logprobs(self, items, answers, **_: Any):
        raise CacheMiss(f"{len(items)} ANSWER_PROB prompts for {self.name!r} are not in the cache; compute them "
                        "with the LLM first")

    def score(self, items, **_: Any):
        raise CacheMiss(f"{len(items)} prompts for {self.name!r} are not in the cache (e.g. question "
                        f"{items[0].question[:80]!r}); run the study with the LLM first")


class LazyScorer(CacheOnlyScorer):
    """A :class:`CacheOnlyScorer` loading the real LLM (``load()``, same cache keys) at the first miss."""

    def __init__(self, name: str, load, **kwargs: Any):
        super().__init__(name, **kwargs)
        self._load, self._llm = load, None

    def llm(self):
        """The real scorer, loaded on first use and checked against this stand-in's cache keys."""
        if self._llm is None:
            llm = self._load()
            mine = (self.name, self.prompt_version, str(self.dtype), self.quantize, self.max_new_tokens)
            theirs = (llm.name, llm.prompt_version, str(getattr(llm, "dtype", "float32")).replace("torch.", ""),
                      getattr(llm, "quantize", None), int(getattr(llm, "max_new_tokens", 24)))
            if mine != theirs:
                raise ValueError(f"the loaded LLM keys the cache as {theirs}, the stand-in as {mine}")
            self._llm = llm
        return self._llm

    def score(self, items, **kwargs: Any):
        return self.llm().score(items, **kwargs)

    def answer_logprobs(self, items, answers, **kwargs: Any):
        return self.llm().answer_logprobs(items, answers, **kwargs)

    def sample_answers(self, item, *args: Any, **kwargs: Any):
        return self.llm().sample_answers(item, *args, **kwargs)


def with_cache(scorer, cache: AnnotationCache | None):
    """``scorer`` behind ``cache`` (a :class:`CachedScorer` is rebuilt on it); ``None``: ``scorer`` as is."""
    if cache is None:
        return scorer
    if isinstance(scorer, CachedScorer):
        return scorer if scorer.cache is cache else CachedScorer(scorer.scorer, cache)
    return CachedScorer(scorer, cache)


def deduped(scorer):
    """``scorer`` scoring each distinct prompt of a call once (two oracle schemas may pick the same passages):
    a :class:`CachedScorer` without a cache (it dedups a call by cache key), unless it is one; ``None`` as is."""
    return scorer if scorer is None or isinstance(scorer, CachedScorer) else CachedScorer(scorer)


def passage_items(records: Iterable[QueryRecord]) -> tuple[list[tuple[int, int]], list[PromptItem]]:
    """One single-passage prompt per (record, passage): ``(positions, items)``."""
    pairs = [((r_i, p_i), record.question, p) for r_i, record in enumerate(records)
             for p_i, p in enumerate(record.passages)]
    return [w for w, _, _ in pairs], [PromptItem(q, [(p.title, p.text)]) for _, q, p in pairs]


def _normalise_fields(fields: Iterable[str]) -> list[str]:
    expanded = [g for f in fields for g in (ERAG_FIELDS if str(f) == "erag" else (str(f),))]
    if unknown := [g for g in expanded if g not in KNOWN_FIELDS]:
        raise ValueError(f"unknown annotation field {unknown[0]!r} (known: {', '.join(KNOWN_FIELDS)})")
    return list(dict.fromkeys(expanded))


def annotate_records(records: Sequence[QueryRecord], scorer, cache: AnnotationCache | None = None, *,
                     fields: Iterable[str] = ("p_no_response", "answer_alone"),
                     mc: MonteCarloConfig | None = None, progress: bool | None = None) -> AnnotationStats:
    """Fill ``Passage.annotations[scorer.name]`` for every passage of ``records`` (in place) with ``scorer``
    (wrapped with ``cache``) or a :class:`CachedScorer`; ``p_no_response`` is kept where present unless the
    prompt runs anyway; eRAG fields imply ``answer_alone``. Returns prompts computed and cached per task."""
    t0 = time.perf_counter()
    cached_scorer = scorer if isinstance(scorer, CachedScorer) else CachedScorer(scorer, cache)
    wanted = _normalise_fields(fields)
    generate = "answer_alone" in wanted or any(f in wanted for f in ERAG_FIELDS)
    where, items = passage_items(records)
    stats = AnnotationStats(passages=len(items))
    name, version = cached_scorer.name, cached_scorer.prompt_version
    before = {task: dict(counts) for task, counts in cached_scorer.stats.by_task.items()}

    # Passages holding what the single-passage prompt would give (a data set's own annotations) skip it.
    needs_prompt = [i for i, (r_i, p_i) in enumerate(where)
                    if generate or "p_no_response" in wanted
                    or "p_no_response" not in records[r_i].passages[p_i].annotations.get(name, {})]
    results = cached_scorer.score([items[i] for i in needs_prompt], generate=generate, progress=progress)
    for (r_i, p_i), res in zip([where[i] for i in needs_prompt], results):
        record = records[r_i]
        ann = record.passages[p_i].annotations.setdefault(name, {})
        ann.update(p_no_response=res.p_no_response, n_prompt_tokens=res.n_prompt_tokens, prompt_version=version)
        if generate and res.answer is not None:
            ann["answer_alone"] = res.answer  # kept with the eRAG labels too: they are derived from it
            if any(f in wanted for f in ERAG_FIELDS):
                ann.update({k: v for k, v in erag_labels(res.answer, record.answers).items() if k in wanted})

    if "answer_logprob" in wanted:
        golds = [records[r_i].answers for r_i, _ in where]
        values = cached_scorer.answer_logprob(items, golds, progress=progress)
        for (r_i, p_i), v in zip(where, values):
            if v is not None:
                records[r_i].passages[p_i].annotations[name]["answer_logprob"] = v
        if values.count(None):
            log.warning("answer_logprob: %d passages belong to questions without gold answers (left out)",
                        values.count(None))

    if "p_no_response_mc" in wanted:
        values = cached_scorer.p_no_response_mc(items, mc or MonteCarloConfig(), progress=progress)
        for (r_i, p_i), v in zip(where, values):
            records[r_i].passages[p_i].annotations[name]["p_no_response_mc"] = v

    # This run's share of the scorer's stats (a CachedScorer passed in may have counted other runs).
    for task, asked in (("score", True), ("answer_logprob", "answer_logprob" in wanted),
                        ("mc", "p_no_response_mc" in wanted)):
        if asked:
            was, now = before.get(task, {"computed": 0, "cached": 0}), cached_scorer.stats.by_task[task]
            stats.add(task, now["computed"] - was["computed"], now["cached"] - was["cached"])
    stats.seconds = round(time.perf_counter() - t0, 3)
    log.info("annotated %d passages with %s: %d computed, %d from the cache (%.1fs)", stats.passages, name,
             stats.computed, stats.cached, stats.seconds)
    return stats


def missing_annotations(records: Sequence[QueryRecord], llm: str, fields: Sequence[str]) -> int:
    return sum(1 for r in records for p in r.passages if any(f not in p.annotations.get(llm, {}) for f in fields))


def ensure_annotations(records: Sequence[QueryRecord], llm: str, fields: Sequence[str], scorer=None, *,
                       progress: bool = True) -> dict[str, Any]:
    """Compute (in place, with :func:`annotate_records`) the ``fields`` missing from ``annotations[llm]``;
    without a scorer a missing one is a :class:`DataError`. Returns ``{"missing", "computed", "cached"}``."""
    n_missing = missing_annotations(records, llm, fields)
    info = {"missing": n_missing, "computed": 0, "cached": 0}
    if not n_missing:
        return info
    if scorer is None:
        raise DataError(f"{n_missing} passages lack {list(fields)} annotations for LLM {llm!r}, and no scorer "
                        "was given to compute them")
    if (scorer_name := getattr(scorer, "name", None)) not in (None, llm):
        raise ValueError(f"the scorer is {scorer_name!r} but the records need annotations of {llm!r}")
    todo = [r for r in records if any(f not in p.annotations.get(llm, {}) for p in r.passages for f in fields)]
    stats = annotate_records(todo, scorer, None, fields=list(fields), progress=progress)
    info.update(computed=stats.computed, cached=stats.cached)
    return info
