"""End-to-end runs, the one path by which an LLM answers whole contexts: answers graded CORRECT / ABSTAINED / WRONG.

A context is a query plus passage ids in prompt order (:class:`Context`, ``SampledContext``, ``ContextRun``).
:func:`run_contexts` prompts the LLM with them (the utility annotation's prompt) and grades the greedy answer
(correct only when the context holds a relevant passage, as in the UDCG paper); with ``cache``, the annotation
cache (keyed on the LLM, prompt version, question and passages in order) answers each context only once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from udcg_ltr.annotate.annotator import CachedScorer, precision_label, with_cache
from udcg_ltr.annotate.cost import BatchClock, CostTracker, device_label, prompt_kind, rate_book
from udcg_ltr.annotate.grading import Outcome, grade_answer, outcome_counts
from udcg_ltr.annotate.prompts import PromptItem
from udcg_ltr.batching import progress_bar
from udcg_ltr.data.contexts import ContextRun
from udcg_ltr.data.schema import DataError, Passage, QueryRecord, records_by_qid


@dataclass(frozen=True)
class Context:
    """Passage ids in prompt order (like a ``ContextRun``); ``kind`` (arm, schema) is kept in ``extra``."""

    qid: str
    context_id: int
    pids: tuple[str, ...]
    kind: str | None = None


def _record_of(by_qid: dict[str, QueryRecord], context) -> QueryRecord:
    if (rec := by_qid.get(context.qid)) is None:
        raise DataError(f"context ({context.qid!r}, {context.context_id}) refers to an unknown query", field="qid")
    return rec


def context_passages(record: QueryRecord, pids: Sequence[str]) -> list[Passage]:
    """The passages ``pids`` of ``record``, in that order (an unknown id is a :class:`DataError`)."""
    table = {p.pid: p for p in record.passages}
    if missing := [pid for pid in pids if pid not in table]:
        raise DataError(f"query {record.qid!r} has no passage(s) {missing}", field="pids")
    return [table[pid] for pid in pids]


def context_has_relevant(record: QueryRecord, pids: Sequence[str], relevance_threshold: int = 1) -> bool:
    return any(p.is_relevant(relevance_threshold) for p in context_passages(record, pids))


def _grade(record: QueryRecord, pids: Sequence[str], answer: str, *, rule: str, relevance_threshold: int,
           **grade_kwargs) -> Outcome:
    """The answer's outcome; correct requires a relevant passage in the context."""
    return grade_answer(answer, record.answers, rule=rule, **grade_kwargs,
                        context_has_relevant=context_has_relevant(record, pids, relevance_threshold))


def grade_runs(records, runs: Sequence[ContextRun], *, rule: str = "contains", relevance_threshold: int = 1,
               regrade: bool = False, **grade_kwargs) -> list[ContextRun]:
    """Copies of ``runs`` with ``outcome`` set (kept as is when already graded, unless ``regrade``)."""
    by_qid = records_by_qid(records)
    out = []
    for run in runs:
        outcome = run.outcome
        if outcome is None or regrade:
            outcome = _grade(_record_of(by_qid, run), run.pids, run.answer, rule=rule,
                             relevance_threshold=relevance_threshold, **grade_kwargs).value
        out.append(dataclasses.replace(run, pids=list(run.pids), outcome=outcome, extra=dict(run.extra)))
    return out


def load_shared_runs(records=None, *, path=None, rule: str = "contains") -> list[ContextRun]:
    """The shared annotated SQuAD end-to-end answers as graded runs (records default to the shared top-10 set)."""
    from udcg_ltr.data.readers.annotated import read_annotated_contexts, read_annotated_squad

    return grade_runs(read_annotated_squad() if records is None else records, read_annotated_contexts(path), rule=rule)


def prompt_items(records, contexts: Sequence) -> list[PromptItem]:
    by_qid = records_by_qid(records)
    return [PromptItem(rec.question, [(p.title, p.text) for p in context_passages(rec, c.pids)])
            for c in contexts for rec in [_record_of(by_qid, c)]]


def run_contexts(records, contexts: Sequence, scorer, cache=None, *, llm_name: str | None = None,
                 rule: str = "contains", relevance_threshold: int = 1, progress: bool = True,
                 batch_items: int = 256) -> list[ContextRun]:
    """Answer every context with the LLM (greedy) and grade it: graded :class:`ContextRun` s in input order.
    ``scorer.score(items, generate=True)`` gets chunks of ``batch_items`` (a long run shows progress and a
    cache persists as it goes); a run's ``extra`` holds the context's ``kind`` and ``n_prompt_tokens``."""
    scorer = with_cache(scorer, cache)
    by_qid = records_by_qid(records)
    contexts = list(contexts)
    items = prompt_items(by_qid, contexts)
    name = llm_name or getattr(scorer, "name", None) or "llm"
    results = []
    # The whole run is announced once, before the first chunk (:mod:`.cost`); a CachedScorer measures each
    # batch, another scorer each chunk.
    kinds = [prompt_kind(len(it.passages)) for it in items]
    if isinstance(scorer, CachedScorer):
        tracker = scorer.cost_tracker(generate=True)
        todo, cached = scorer.pending(items, generate=True)
        tracker.plan([kinds[i] for i in todo], [kinds[i] for i in cached])
    else:
        tracker = CostTracker(name, precision_label(scorer), device_label(scorer), rate_book(None), generate=True)
        tracker.plan(kinds)
    clock = BatchClock()
    with progress_bar(len(items), f"end-to-end {name}", progress, unit="context") as bar:
        try:
            for start in range(0, len(items), batch_items):
                chunk = items[start:start + batch_items]
                if isinstance(scorer, CachedScorer):
                    out = list(scorer.score(chunk, generate=True, tracker=tracker))
                else:
                    out = list(scorer.score(chunk, generate=True))
                    tracker.measured(kinds[start:start + batch_items], clock.tick())
                if len(out) != len(chunk):
                    raise ValueError(f"scorer returned {len(out)} results for {len(chunk)} prompts")
                results.extend(out)
                bar.update(len(chunk))
        finally:
            tracker.close()
    runs = []
    for c, res in zip(contexts, results):
        answer = res.answer if res.answer is not None else ""
        outcome = _grade(by_qid[c.qid], c.pids, answer, rule=rule, relevance_threshold=relevance_threshold)
        extra: dict[str, Any] = {"kind": c.kind} if getattr(c, "kind", None) else {}
        if getattr(res, "n_prompt_tokens", None) is not None:
            extra["n_prompt_tokens"] = int(res.n_prompt_tokens)
        runs.append(ContextRun(qid=c.qid, context_id=int(c.context_id), pids=list(c.pids), answer=answer, llm=name,
                               p_no_response=float(res.p_no_response), outcome=outcome.value, extra=extra))
    return runs


def run_summary(runs: Sequence[ContextRun]) -> dict[str, int]:
    """Outcome counts plus queries and contexts (for reports)."""
    counts = outcome_counts(r.outcome for r in runs if r.outcome is not None)
    counts.update(contexts=len(runs), queries=len({r.qid for r in runs}), ungraded=sum(r.outcome is None for r in runs))
    return counts


def _count_tokens(tokenizer: Any, text: str) -> int:
    return len(text.split()) if tokenizer is None else len(tokenizer.encode(text, add_special_tokens=False))


def end_to_end_selection(records: Sequence[QueryRecord], contexts: Sequence[Sequence[str]], scorer: Any, *,
                         relevance_threshold: int = 1, match_rule: str = "contains", tokenizer: Any = None,
                         return_outcomes: bool = False) -> dict[str, Any]:
    """Grade the LLM's answer to each query's kept context (``contexts``: pids in prompt order, aligned with
    ``records``) through :func:`run_contexts`. An empty context (a selector's k = 0) is not sent: the
    instruction makes the LLM abstain, so it counts as abstained with a 0-token prompt. Returns the
    ``{correct,abstained,wrong}_rate`` and the cost: ``mean_passages``, ``mean_prompt_tokens`` and
    ``mean_context_tokens`` (kept passages' tokens with ``tokenizer``, default the scorer's, else words)."""
    if len(records) != len(contexts):
        raise ValueError(f"{len(records)} records but {len(contexts)} contexts")
    tokenizer = tokenizer if tokenizer is not None else getattr(scorer, "tokenizer", None)
    send = [i for i, c in enumerate(contexts) if len(c) > 0]
    runs = run_contexts({records[i].qid: records[i] for i in send},
                        [Context(records[i].qid, i, tuple(contexts[i])) for i in send], scorer,
                        rule=match_rule, relevance_threshold=relevance_threshold, progress=False)
    outcomes, prompt_tokens, context_tokens = ["abstained"] * len(records), 0.0, 0.0
    for i, run in zip(send, runs):
        outcomes[i] = run.outcome
        prompt_tokens += float(run.extra.get("n_prompt_tokens", 0))
        kept = context_passages(records[i], contexts[i])
        context_tokens += sum(_count_tokens(tokenizer, f"{p.title} {p.text}") for p in kept)
    n = max(len(records), 1)
    out: dict[str, Any] = {f"{name}_rate": c / n for name, c in outcome_counts(outcomes).items()}
    out.update(mean_passages=float(np.mean([len(c) for c in contexts])) if contexts else 0.0,
               mean_prompt_tokens=prompt_tokens / n, mean_context_tokens=context_tokens / n,
               context_token_unit="tokens" if tokenizer is not None else "words")
    if return_outcomes:
        out["outcomes"] = outcomes
    return out

