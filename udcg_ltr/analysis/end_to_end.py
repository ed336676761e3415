"""End-to-end runs: the LLM answers whole contexts; answers are graded CORRECT / ABSTAINED / WRONG.

A context is a query plus passage ids in prompt order (a :class:`~udcg_ltr.fit.sampling.SampledContext`
or a :class:`~udcg_ltr.data.contexts.ContextRun`). :func:`run_contexts` turns each into the same
prompt family as the utility annotation (a ``PromptItem`` with the context's ``(title, text)``
passages in order: the paper's instruction, ``Document [i] (Title: ...) ...``), asks the scorer for
P(NO-RESPONSE) and the greedy answer (``scorer.score(items, generate=True)``), and grades the answer
with :func:`udcg_ltr.annotate.grading.grade_answer` -- correct only when the context holds a
relevant passage, as in the UDCG paper.

Caching: pass ``cache`` (an :class:`udcg_ltr.annotate.cache.AnnotationCache`, e.g.
``AnnotationCache(cache_dir() / "annotations" / llm_name)``) and the scorer is wrapped in
:class:`udcg_ltr.annotate.annotator.CachedScorer`, whose key covers the LLM, the prompt version, the
task, the question and the sha256 of every passage's title and text in prompt order -- so a context
is answered once, whatever study asks for it again (or pass a ``CachedScorer`` as ``scorer``). Any object with the same ``.score`` method may be passed as ``scorer``
(tests use a fake).

:func:`load_shared_runs` reads the shared annotated SQuAD's ready-made end-to-end answers (100
queries x 8 contexts of 5 passages) and grades them the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from udcg_ltr.annotate.grading import Outcome, grade_answer, outcome_counts
from udcg_ltr.data.contexts import ContextRun
from udcg_ltr.data.schema import DataError, QueryRecord


def _records_by_qid(records) -> dict[str, QueryRecord]:
    return dict(records) if isinstance(records, Mapping) else {r.qid: r for r in records}


def context_has_relevant(record: QueryRecord, pids: Sequence[str], relevance_threshold: int = 1) -> bool:
    table = {p.pid: p for p in record.passages}
    missing = [pid for pid in pids if pid not in table]
    if missing:
        raise DataError(f"query {record.qid!r} has no passage(s) {missing}", field="pids")
    return any(table[pid].is_relevant(relevance_threshold) for pid in pids)


def grade_run(run: ContextRun, record: QueryRecord, *, rule: str = "contains", relevance_threshold: int = 1,
              **grade_kwargs) -> Outcome:
    """The outcome of one run (correct requires a relevant passage in the context)."""
    return grade_answer(run.answer, record.answers, rule=rule,
                        context_has_relevant=context_has_relevant(record, run.pids, relevance_threshold),
                        **grade_kwargs)


def grade_runs(records, runs: Sequence[ContextRun], *, rule: str = "contains", relevance_threshold: int = 1,
               regrade: bool = False, **grade_kwargs) -> list[ContextRun]:
    """Copies of ``runs`` with ``outcome`` set (kept as is when already graded, unless ``regrade``)."""
    by_qid = _records_by_qid(records)
    out = []
    for run in runs:
        rec = by_qid.get(run.qid)
        if rec is None:
            raise DataError(f"run ({run.qid!r}, {run.context_id}) refers to an unknown query", field="qid")
        outcome = run.outcome
        if outcome is None or regrade:
            outcome = grade_run(run, rec, rule=rule, relevance_threshold=relevance_threshold, **grade_kwargs).value
        out.append(ContextRun(qid=run.qid, context_id=run.context_id, pids=list(run.pids), answer=run.answer,
                              llm=run.llm, p_no_response=run.p_no_response, outcome=outcome,
                              extra=dict(run.extra)))
    return out


def load_shared_runs(records=None, *, path=None, rule: str = "contains") -> list[ContextRun]:
    """The shared annotated SQuAD end-to-end answers as graded runs (records default to the shared top-10 set)."""
    from udcg_ltr.data.readers.annotated import read_annotated_contexts, read_annotated_squad

    if records is None:
        records = read_annotated_squad()
    return grade_runs(records, read_annotated_contexts(path), rule=rule)


def _prompt_item_cls():
    try:
        from udcg_ltr.annotate.scorer import PromptItem
        return PromptItem
    except ImportError:  # the annotate package without its scorer: a structurally identical item
        @dataclass
        class PromptItem:  # noqa: F811
            question: str
            passages: list = field(default_factory=list)
        return PromptItem


def prompt_items(records, contexts: Sequence) -> list[Any]:
    """One ``PromptItem(question, [(title, text), ...])`` per context, passages in prompt order."""
    item_cls = _prompt_item_cls()
    by_qid = _records_by_qid(records)
    items = []
    for c in contexts:
        rec = by_qid.get(c.qid)
        if rec is None:
            raise DataError(f"context ({c.qid!r}, {c.context_id}) refers to an unknown query", field="qid")
        table = {p.pid: p for p in rec.passages}
        try:
            passages = [(table[pid].title, table[pid].text) for pid in c.pids]
        except KeyError as err:
            raise DataError(f"query {c.qid!r} has no passage {err.args[0]!r}", field="pids") from None
        items.append(item_cls(rec.question, passages))
    return items


def _cached(scorer, cache):
    """``scorer`` behind the annotation cache: ``cache.wrap(scorer)`` when the cache offers it, else the
    annotate helper's ``CachedScorer(scorer, cache)``."""
    if cache is None:
        return scorer
    if hasattr(cache, "wrap"):
        return cache.wrap(scorer)
    from udcg_ltr.annotate.annotator import CachedScorer

    if isinstance(scorer, CachedScorer):  # already cached: put this cache in front of its scorer
        scorer = scorer.scorer
    return CachedScorer(scorer, cache)


def run_contexts(records, contexts: Sequence, scorer, cache=None, *, llm_name: str | None = None,
                 rule: str = "contains", relevance_threshold: int = 1, progress: bool = True,
                 batch_items: int = 256) -> list[ContextRun]:
    """Answer every context with the LLM (greedy) and grade it; returns graded :class:`ContextRun` s in input order.

    ``scorer``: anything with ``score(items, *, generate=True) -> [result(p_no_response, answer, ...)]``
    (the annotate helper's ``LLMScorer`` or ``CachedScorer``); ``cache``: an annotation cache to wrap
    it with (see the module docstring). Items go to the scorer in chunks of ``batch_items`` so that a
    long run shows progress and a cache persists as it goes.
    """
    from tqdm.auto import tqdm

    by_qid = _records_by_qid(records)
    contexts = list(contexts)
    items = prompt_items(by_qid, contexts)
    runner = _cached(scorer, cache)
    name = llm_name or getattr(scorer, "name", None) or "llm"
    results = []
    bar = tqdm(total=len(items), desc=f"end-to-end {name}", unit="context", disable=not progress or len(items) == 0)
    try:
        for start in range(0, len(items), batch_items):
            chunk = items[start:start + batch_items]
            out = runner.score(chunk, generate=True)
            if len(out) != len(chunk):
                raise RuntimeError(f"scorer returned {len(out)} results for {len(chunk)} prompts")
            results.extend(out)
            bar.update(len(chunk))
    finally:
        bar.close()
    runs = []
    for c, res in zip(contexts, results):
        rec = by_qid[c.qid]
        answer = res.answer if res.answer is not None else ""
        outcome = grade_answer(answer, rec.answers, rule=rule,
                               context_has_relevant=context_has_relevant(rec, c.pids, relevance_threshold))
        runs.append(ContextRun(qid=c.qid, context_id=int(c.context_id), pids=list(c.pids), answer=answer, llm=name,
                               p_no_response=float(res.p_no_response), outcome=outcome.value,
                               extra={"kind": getattr(c, "kind", None)} if getattr(c, "kind", None) else {}))
    return runs


def run_summary(runs: Sequence[ContextRun]) -> dict[str, int]:
    """Outcome counts plus queries and contexts (for reports)."""
    counts = outcome_counts(r.outcome for r in runs if r.outcome is not None)
    counts["contexts"] = len(runs)
    counts["queries"] = len({r.qid for r in runs})
    counts["ungraded"] = sum(r.outcome is None for r in runs)
    return counts
