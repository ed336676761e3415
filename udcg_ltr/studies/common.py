"""Shared machinery of the paper studies: LLM runs through the cache, query selection, outcome rates, the report.

Every study is ``run_<name>(records, scorer_or_runs, *, llm, out_dir, logger=None, cache=True, **params) ->
StudyReport``: ``records`` carry the LLM's single-passage annotations (computed when missing and a scorer is given);
``scorer_or_runs`` is an LLM scorer that answers the study's contexts **or** ready-made ``ContextRun`` s; every LLM call
goes through an annotation cache (``cache=True``: the annotation CLI's; a path or a cache object; ``None`` only for
scorers that need none), so a killed study resumes and a rerun costs nothing. Randomness is per query (``query_rng``
salted with the study's name): a query's contexts do not depend on which other queries are in the study.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.annotate.annotator import deduped, with_cache
from udcg_ltr.annotate.cache import open_cache
from udcg_ltr.annotate.end_to_end import Context, grade_runs, run_contexts
from udcg_ltr.annotate.grading import Outcome
from udcg_ltr.data.contexts import OUTCOMES, ContextRun, write_context_runs
from udcg_ltr.data.schema import DataError, Passage, QueryRecord
from udcg_ltr.fit.sampling import retrieval_order
from udcg_ltr.io import atomic_write_json, atomic_write_text, json_safe
from udcg_ltr.report import fmt_pct_ci, table_cell, write_csv, write_table
from udcg_ltr.stats.bootstrap import rate_ci
from udcg_ltr.tracking import as_run_logger

#: The CSV columns of :func:`outcome_rates`: each outcome's rate and its CI bounds.
OUTCOME_COLUMNS = tuple(f"{o}{s}" for o in OUTCOMES for s in ("", "_lo", "_hi"))


@dataclass(frozen=True)
class StudyParams:
    """The parameters every study shares: which queries (``splits`` in order of preference, at most
    ``max_queries``), bootstrap resamples and seed, the answer-grading ``rule`` and the relevance threshold;
    ``dataset``: the data set's name, for the plot titles and reports (the jobs pass ``dataset.name``)."""

    splits: tuple[str, ...] | None = None
    max_queries: int | None = None
    n_bootstrap: int = 1000
    seed: int = 0
    rule: str = "contains"
    relevance_threshold: int = 1
    dataset: str | None = None


@dataclass
class StudyReport:
    """What a study produced: ``rows``, the headline table (raw values); ``tables``, every table by name (the
    headline under ``"table"``, per-query rows under ``"per_query"`` ...); ``paths``, the files written;
    ``meta``, parameters and counts (always ``n_queries``); ``scalars``, the headline numbers (logged)."""

    name: str
    rows: list[dict[str, Any]]
    markdown: str
    paths: dict[str, Path]
    meta: dict[str, Any]
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    scalars: dict[str, float] = field(default_factory=dict)
    runs: list[ContextRun] = field(default_factory=list)

    @property
    def n_queries(self) -> int:
        return int(self.meta["n_queries"])

    def log_to(self, logger, *, prefix: str | None = None) -> dict[str, Any]:
        """Log the tables, PNGs and headline scalars (NaN / None left out) under ``prefix`` (default ``"<name>/"``)
        to a ``RunLogger``, a W&B run or a Lightning ``WandbLogger``; returns what was logged."""
        images = {k: v for k, v in self.paths.items() if str(v).endswith(".png")}
        scalars = {k: v for k, v in self.scalars.items() if table_cell(v) is not None}  # None for NaN / None
        return as_run_logger(logger).log_results(self.tables, images, scalars,
                                                 prefix=f"{self.name}/" if prefix is None else prefix)


def finish_report(report: StudyReport, out_dir: Path, logger=None) -> StudyReport:
    """Write the graded runs (``<name>_runs.csv`` and ``.jsonl``), ``report.md`` and ``summary.json`` (atomically),
    then log when a logger is given. The markdown gets its last section here: the list of the files written."""
    files = [p.name for p in report.paths.values()] + ["report.md", "summary.json"]
    if report.runs:  # the graded answers: a table to read, and JSONL reusable as ``scorer_or_runs`` (no LLM call)
        rows = [{"qid": r.qid, "context_id": r.context_id, "kind": r.extra.get("kind"), "pids": " ".join(r.pids),
                 "outcome": r.outcome, "p_no_response": r.p_no_response, "answer": r.answer} for r in report.runs]
        report.paths["runs_csv"] = write_csv(out_dir / f"{report.name}_runs.csv", rows)
        report.paths["runs_jsonl"] = write_context_runs(out_dir / f"{report.name}_runs.jsonl", report.runs)
        files += [report.paths["runs_csv"].name, report.paths["runs_jsonl"].name]
    report.markdown = report.markdown.rstrip("\n") + "\n\n## Files\n\n" + "".join(f"- `{f}`\n" for f in files)
    report.paths["report_md"] = out_dir / "report.md"
    atomic_write_text(report.paths["report_md"], report.markdown)
    report.paths["summary_json"] = out_dir / "summary.json"
    summary = {"name": report.name, "meta": report.meta, "rows": report.rows, "scalars": report.scalars,
               "tables": {k: v for k, v in report.tables.items() if k != "per_query"}}
    atomic_write_json(report.paths["summary_json"], json_safe(summary))
    if logger is not None:
        report.log_to(logger)
    return report


def add_table(paths: dict[str, Path], key: str, stem: Path, rows, columns, **kwargs) -> str:
    """Write a table with :func:`udcg_ltr.report.write_table`, record its files as ``paths[key + "_md" / "_csv"]``
    and return its markdown (for the report)."""
    written = write_table(stem, rows, columns, **kwargs)
    paths[f"{key}_md"], paths[f"{key}_csv"] = written["md"], written["csv"]
    return written["md"].read_text(encoding="utf-8")


def config_from(params: Mapping[str, Any], cls):
    """A study config of class ``cls`` from keyword parameters: ``config=`` (a ``cls`` instance or a mapping
    of its fields, e.g. a Hydra node) plus overrides; unknown keys are a ``TypeError``."""
    params = dict(params)
    base = params.pop("config", None)
    if base is not None and not isinstance(base, cls):  # a mapping of fields: the defaults, overridden
        params, base = {**dict(base), **params}, None
    known = {f.name for f in fields(cls)}
    unknown = set(params) - known
    if unknown:
        raise TypeError(f"unknown {cls.__name__} parameters {sorted(unknown)} (known: {sorted(known)})")
    splits = params.get("splits")
    if splits is not None:
        params["splits"] = (splits,) if isinstance(splits, str) else tuple(splits)
    return replace(base or cls(), **params)


def annotation_name(llm) -> str:
    """The annotation name of ``llm``: the name itself (a string) or a scorer's ``.name``."""
    name = llm if isinstance(llm, str) else getattr(llm, "name", None)
    if not isinstance(name, str):
        raise TypeError("llm must be the annotation name (str) or a scorer with a .name")
    return name


def split_scorer_or_runs(llm, scorer_or_runs) -> tuple[str, Any, list[ContextRun] | None]:
    """``(llm name, scorer or None, runs or None)`` from the study arguments: ``llm`` is the annotation name, or a
    scorer (then it answers when ``scorer_or_runs`` is None); ``scorer_or_runs`` a scorer or ``ContextRun`` s."""
    scorer, runs = None, None
    if hasattr(scorer_or_runs, "score"):
        scorer = scorer_or_runs
    elif isinstance(scorer_or_runs, Iterable) and not isinstance(scorer_or_runs, (str, bytes)):
        runs = list(scorer_or_runs)
        bad = [r for r in runs if not isinstance(r, ContextRun)]
        if bad:
            raise TypeError(f"scorer_or_runs: expected ContextRun s, got {type(bad[0]).__name__}")
    elif scorer_or_runs is not None:
        raise TypeError(f"scorer_or_runs must be a scorer (with .score) or ContextRun s, got "
                        f"{type(scorer_or_runs).__name__}")
    name = annotation_name(llm)
    if scorer is None and runs is None:
        if isinstance(llm, str):
            raise ValueError("a study needs an LLM scorer or ready-made context runs (scorer_or_runs)")
        scorer = llm
    return name, scorer, runs


def study_inputs(llm, scorer_or_runs, out_dir: str | os.PathLike,
                 cache) -> tuple[str, Any, list[ContextRun] | None, Path]:
    """What every study starts from: ``(llm name, scorer behind the cache or None, ready-made runs or None,
    the output folder, created)``."""
    name, scorer, runs = split_scorer_or_runs(llm, scorer_or_runs)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if scorer is not None:
        scorer = with_cache(scorer, open_cache(cache, name))
    return name, scorer, runs, out


def answer_contexts(records: Mapping[str, QueryRecord], contexts: Sequence[Context], *, llm: str, scorer=None,
                    runs: Sequence[ContextRun] | None = None, rule: str = "contains", relevance_threshold: int = 1,
                    progress: bool = True) -> list[ContextRun]:
    """Graded runs for ``contexts`` (input order): answered by ``scorer``, or looked up in ``runs`` by ``(qid, passage
    ids in prompt order)`` and regraded with ``rule`` (a context without a run is a :class:`DataError`)."""
    if scorer is not None:
        return run_contexts(records, contexts, deduped(scorer), llm_name=llm, rule=rule,
                            relevance_threshold=relevance_threshold, progress=progress)
    table: dict[tuple, ContextRun] = {}
    for r in runs or ():
        table.setdefault((r.qid, tuple(r.pids)), r)  # the first run of a context wins
    missing = [c for c in contexts if (c.qid, tuple(c.pids)) not in table]
    if missing:
        raise DataError(f"{len(missing)} of {len(contexts)} study contexts have no ready-made run (e.g. query "
                        f"{missing[0].qid!r}, passages {list(missing[0].pids)}); pass a scorer to answer them")
    found = [table[(c.qid, tuple(c.pids))] for c in contexts]
    graded = grade_runs(records, found, rule=rule, relevance_threshold=relevance_threshold, regrade=True)
    return [ContextRun(qid=c.qid, context_id=c.context_id, pids=list(c.pids), answer=r.answer, llm=llm,
                       p_no_response=r.p_no_response, outcome=r.outcome, extra={**r.extra, "kind": c.kind})
            for c, r in zip(contexts, graded)]


def order_by_splits(records: Sequence[QueryRecord], splits: Sequence[str] | None) -> list[QueryRecord]:
    """Records of ``splits`` in the order the splits are listed (input order within a split); all when ``None``."""
    return list(records) if splits is None else [r for s in splits for r in records if (r.split or "none") == s]


def select_queries(records: Sequence[QueryRecord], *, splits: Sequence[str] | None = None,
                   max_queries: int | None = None,
                   eligible: Callable[[QueryRecord], str | None] | None = None) -> tuple[list[QueryRecord], dict]:
    """Eligible records, split by split (see :func:`order_by_splits`), capped at ``max_queries``, and the selection
    info; ``eligible(record)`` returns ``None`` to keep a record or the reason (counted in the info) it is left out."""
    pool = order_by_splits(records, splits)
    reasons = [None if eligible is None else eligible(r) for r in pool]
    kept = [r for r, reason in zip(pool, reasons) if reason is None][:max_queries]
    return kept, {"candidates": len(pool), "excluded": dict(Counter(x for x in reasons if x is not None)),
                  "selected": len(kept), "by_split": dict(Counter(r.split or "none" for r in kept)),
                  "splits": list(splits) if splits is not None else "all"}


def select_plans(records: Sequence[QueryRecord], cfg: StudyParams, plan: Callable[[QueryRecord], Any]
                 ) -> tuple[list, dict]:
    """``(plans of the selected queries, selection info)`` (:func:`select_queries` with ``cfg.splits`` and
    ``cfg.max_queries``): ``plan(record)`` returns the query's plan, or the reason (a string) it is left out."""
    plans = {r.qid: plan(r) for r in order_by_splits(records, cfg.splits)}
    selected, info = select_queries(records, splits=cfg.splits, max_queries=cfg.max_queries,
                                    eligible=lambda r: plans[r.qid] if isinstance(plans[r.qid], str) else None)
    return [plans[r.qid] for r in selected], info


def describe_selection(info: Mapping[str, Any], max_queries: int | None = None) -> str:
    """One report line on which queries a study used (splits, counts per split, exclusions, cap)."""
    splits = info["splits"]
    where = "all splits" if splits == "all" else f"splits {', '.join(splits)} (in that order of preference)"
    by_split = ", ".join(f"{s} {n}" for s, n in info["by_split"].items())
    excluded = ", ".join(f"{n} {reason}" for reason, n in sorted(info["excluded"].items())) or "none"
    cap = f"; the first {max_queries} eligible kept" if max_queries is not None else ""
    return (f"{info['selected']} queries ({by_split}) from {info['candidates']} candidates in {where}; "
            f"left out: {excluded}{cap}")


def plot_title(what: str, *, dataset: str | None, n_queries: int, llm: str | None = None,
               by_split: Mapping[str, int] | None = None, split: str | None = None) -> str:
    """A study plot's title: what it shows, then e.g. ``"squad, split test: 60 queries, LLM qwen"`` (the
    split(s) from ``by_split``, the queries per split of :func:`select_queries`, or ``split``)."""
    if by_split and len(by_split) == 1:
        where = f"split {next(iter(by_split))}"
    elif by_split:
        where = "splits " + " + ".join(f"{s} {n}" for s, n in by_split.items())
    else:
        where = f"split {split}" if split and split != "all" else "all splits"
    return f"{what}\n{dataset or 'unnamed data set'}, {where}: {n_queries} queries" + (f", LLM {llm}" if llm else "")


def distracting_effect(p: Passage, llm: str) -> float:
    """DE of an irrelevant passage: ``1 - P(NO-RESPONSE | q, p)`` (its negative utility's magnitude, Eq. 2)."""
    return 1.0 - p.p_no_response(llm)


def pick_passages(record: QueryRecord, llm: str, relevant: str, relevance_threshold: int
                  ) -> tuple[Passage | None, list[Passage]]:
    """The study's relevant passage (``relevant``: ``"top_ranked"``, the best-ranked; ``"best_utility"``, the
    highest utility, ties to the better-ranked; None without one) and the irrelevant ones, in retrieval order
    (relevant: grade >= ``relevance_threshold``)."""
    order = retrieval_order(record)
    rel = [p for p in order if p.is_relevant(relevance_threshold)]
    irr = [p for p in order if not p.is_relevant(relevance_threshold)]
    if relevant == "best_utility" and rel:
        return max(rel, key=lambda p: p.utility(llm, relevance_threshold)), irr  # max keeps the first of ties
    return (rel[0] if rel else None), irr


def outcome_indicators(runs: Sequence[ContextRun]) -> dict[str, np.ndarray]:
    """``{"correct": [n], "abstained": [n], "wrong": [n], "score": [n]}`` float arrays (score: 2/1/0)."""
    outcomes = [r.outcome for r in runs]
    out = {o: np.array([x == o for x in outcomes], dtype=np.float64) for o in OUTCOMES}
    out["score"] = np.array([Outcome(x).score for x in outcomes], dtype=np.float64)
    return out


def outcome_rates(indicators: Mapping[str, np.ndarray], n_bootstrap: int, seed: int,
                  where: Any = slice(None)) -> dict[str, float]:
    """Each outcome's rate over queries (``indicators[o][where]``) with its bootstrap 95% CI, under the keys of
    :data:`OUTCOME_COLUMNS` (:func:`udcg_ltr.stats.bootstrap.rate_ci`)."""
    rates = (v for o in OUTCOMES for v in rate_ci(indicators[o][where], n_bootstrap, seed))
    return dict(zip(OUTCOME_COLUMNS, rates))


def outcome_bars(rows: Sequence[Mapping[str, Any]], label: Callable[[Mapping[str, Any]], str]) -> list[list]:
    """``[labels, values, CI lows, CI highs]`` of a bar chart of every outcome's rate (percentage points) in every
    row, outcome by outcome, each bar labelled ``"<outcome> | <label(row)>"``."""
    bars = [(f"{o} | {label(r)}", *(100 * r[f"{o}{s}"] for s in ("", "_lo", "_hi"))) for o in OUTCOMES for r in rows]
    return [list(column) for column in zip(*bars)]


def pct_ci(row: Mapping[str, Any], key: str) -> str:
    """``row[key]`` with its CI (``key_lo``, ``key_hi``) in percentage points (:func:`udcg_ltr.report.fmt_pct_ci`)."""
    return fmt_pct_ci(row[key], row[f"{key}_lo"], row[f"{key}_hi"])
