"""Shared machinery of the paper studies: contexts, LLM runs through the cache, paired statistics, reports.

Every study (:mod:`~udcg_ltr.studies.distractors`, :mod:`~udcg_ltr.studies.position`,
:mod:`~udcg_ltr.studies.oracle`, :mod:`~udcg_ltr.studies.context_size`) follows one shape::

    run_<name>(records, scorer_or_runs, *, llm, out_dir, logger=None, **params) -> StudyReport

* ``records``: :class:`~udcg_ltr.data.schema.QueryRecord` s. Single-passage annotations of the LLM
  (``p_no_response``, and ``answer_alone`` where a study needs eRAG labels) are read from
  ``Passage.annotations[llm]``; when they are missing and a scorer is given, they are computed
  (in place, through the cache) with :func:`udcg_ltr.annotate.annotator.ensure_annotations`.
* ``scorer_or_runs``: an LLM scorer (``LLMScorer``, ``CachedScorer`` or anything with
  ``score(items, generate=True)``) that answers the study's contexts, **or** ready-made
  :class:`~udcg_ltr.data.contexts.ContextRun` s looked up by ``(qid, passage ids in prompt order)``.
* every LLM call goes through an :class:`~udcg_ltr.annotate.cache.AnnotationCache` (``cache=True``:
  ``cache_dir()/annotations/<llm name>``, the annotation CLI's folder; a path or a cache object;
  ``None``/``False`` only for scorers that need no cache, e.g. test fakes), so a killed study resumes
  and a rerun costs nothing.

Randomness is per query (:func:`udcg_ltr.fit.sampling.query_rng` salted with the study's name): a query's
contexts do not depend on which other queries are in the study.

Statistics shared by the studies (all over queries, the unit of resampling):

* :func:`rate_ci`: a rate with its bootstrap percentile 95% interval (:func:`udcg_ltr.analysis.bootstrap.bootstrap_ci`);
* :func:`paired_difference`: mean paired difference, bootstrap CI and the centred-bootstrap p
  (:func:`udcg_ltr.analysis.bootstrap.paired_bootstrap_test`);
* :func:`wilcoxon_paired`: ``scipy.stats.wilcoxon`` on per-query paired values (zero differences
  dropped, the ``wilcox`` convention; p = 1 when every difference is zero);
* :func:`mcnemar_exact`: McNemar's exact test on paired binary outcomes (two-sided binomial test
  of the discordant pairs, ``b`` vs ``c``, p = 0.5);
* :func:`cochran_q`: Cochran's Q for ``k`` related binary samples (chi-square with ``k - 1`` df);
* :func:`paired_ratio_ci`: bootstrap CI of a ratio of two paired means (same resampled queries).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.analysis.bootstrap import bootstrap_ci, paired_bootstrap_test
from udcg_ltr.analysis.report import log_to_wandb
from udcg_ltr.annotate.annotator import DedupScorer, with_cache
from udcg_ltr.annotate.cache import open_cache
from udcg_ltr.annotate.end_to_end import Context, grade_runs, run_contexts
from udcg_ltr.annotate.grading import Outcome
from udcg_ltr.data.contexts import ContextRun, write_context_runs
from udcg_ltr.data.schema import DataError, Passage, QueryRecord
from udcg_ltr.io import atomic_write_json, atomic_write_text, json_safe

OUTCOMES = ("correct", "abstained", "wrong")


# =============================================================================================
# contexts and reports


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


#: One context of a study: passage ids in prompt order; ``kind``: the arm / position / schema it belongs to.
StudyContext = Context


@dataclass
class StudyReport:
    """What a study produced.

    ``rows``: the headline table (one dict a row, raw values); ``tables``: every table by name (the
    headline under ``"table"``, per-query rows under ``"per_query"`` ...); ``markdown``: the report;
    ``paths``: files written (markdown + CSV tables, PNGs, ``report.md``, ``summary.json``);
    ``meta``: parameters and counts, always with ``n_queries``; ``scalars``: headline numbers
    (logged as the run summary).
    """

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
        """Log tables, PNGs and the headline scalars.

        ``logger``: a :class:`udcg_ltr.tracking.RunLogger` (``log_table`` / ``log_image`` /
        ``summary``), or a W&B run / Lightning ``WandbLogger`` (through
        :func:`udcg_ltr.analysis.report.log_to_wandb`). Returns what was logged.
        """
        prefix = f"{self.name}/" if prefix is None else prefix
        images = {k: v for k, v in self.paths.items() if str(v).endswith(".png")}
        scalars = {k: v for k, v in self.scalars.items() if v is not None and not _isnan(v)}
        if logger is None:
            return {"tables": list(self.tables), "images": list(images), "scalars": scalars}
        if hasattr(logger, "log_table") and hasattr(logger, "log_image"):
            for name, rows in self.tables.items():
                cols = _keys(rows)
                logger.log_table(f"{prefix}{name}", [[_cell(r.get(c)) for c in cols] for r in rows], cols)
            for name, path in images.items():
                logger.log_image(f"{prefix}{name}", path)
            if hasattr(logger, "summary"):
                logger.summary({f"{prefix}{k}": v for k, v in scalars.items()})
            return {"tables": list(self.tables), "images": list(images), "scalars": scalars}
        return log_to_wandb(logger, tables=self.tables, images=images, scalars=scalars, prefix=prefix)


def _keys(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    keys: list[str] = []
    for r in rows:
        keys.extend(k for k in r if k not in keys)
    return keys


def _cell(v):
    if isinstance(v, (list, tuple)):
        return " ".join(str(x) for x in v)
    if isinstance(v, np.generic):
        return v.item()
    return v


def _isnan(x) -> bool:
    try:
        return math.isnan(float(x))
    except (TypeError, ValueError):
        return False


def finish_report(report: StudyReport, out_dir: Path, logger=None) -> StudyReport:
    """Write the graded runs (``<name>_runs.jsonl``), ``report.md`` and ``summary.json`` (atomically), then log
    when a logger is given. The markdown's last section is its file list: the runs file is appended to it."""
    if report.runs:  # the graded answers, reusable as ``scorer_or_runs`` (no LLM needed to redo the tables)
        report.paths["runs_jsonl"] = write_context_runs(out_dir / f"{report.name}_runs.jsonl", report.runs)
        report.markdown += f"- `{report.paths['runs_jsonl'].name}`\n"
    report.paths["report_md"] = out_dir / "report.md"
    atomic_write_text(report.paths["report_md"], report.markdown)
    report.paths["summary_json"] = out_dir / "summary.json"
    atomic_write_json(report.paths["summary_json"], json_safe({"name": report.name, "meta": report.meta,
                                                               "rows": report.rows, "scalars": report.scalars,
                                                               "tables": {k: v for k, v in report.tables.items()
                                                                          if k != "per_query"}}))
    if logger is not None:
        report.log_to(logger)
    return report


def config_from(params: Mapping[str, Any], cls):
    """A study config of class ``cls`` from keyword parameters: ``config=`` (a ``cls`` instance or a mapping
    of its fields, e.g. a Hydra node) plus overrides; unknown keys are a ``TypeError``. Sequences
    (Hydra lists) become tuples."""
    params = dict(params)
    base = params.pop("config", None)
    if base is None:
        base = cls()
    elif not isinstance(base, cls):
        params = {**dict(base), **params}
        base = cls()
    known = {f.name for f in fields(cls)}
    unknown = set(params) - known
    if unknown:
        raise TypeError(f"unknown {cls.__name__} parameters {sorted(unknown)} (known: {sorted(known)})")
    if "splits" in params and params["splits"] is not None and not isinstance(params["splits"], str):
        params["splits"] = tuple(params["splits"])
    elif isinstance(params.get("splits"), str):
        params["splits"] = (params["splits"],)
    return replace(base, **params)


# =============================================================================================
# LLM, annotations, cache, runs


def split_scorer_or_runs(llm, scorer_or_runs) -> tuple[str, Any, list[ContextRun] | None]:
    """``(llm name, scorer or None, runs or None)`` from the study arguments.

    ``llm`` is the annotation name, or a scorer (its ``.name``; it then answers when
    ``scorer_or_runs`` is None). ``scorer_or_runs`` is a scorer or a sequence of ``ContextRun`` s.
    """
    scorer, runs = None, None
    if scorer_or_runs is None:
        pass
    elif hasattr(scorer_or_runs, "score"):
        scorer = scorer_or_runs
    elif isinstance(scorer_or_runs, Iterable) and not isinstance(scorer_or_runs, (str, bytes)):
        runs = list(scorer_or_runs)
        bad = [r for r in runs if not isinstance(r, ContextRun)]
        if bad:
            raise TypeError(f"scorer_or_runs: expected ContextRun s, got {type(bad[0]).__name__}")
    else:
        raise TypeError(f"scorer_or_runs must be a scorer (with .score) or ContextRun s, got "
                        f"{type(scorer_or_runs).__name__}")
    if isinstance(llm, str):
        name = llm
    else:
        name = getattr(llm, "name", None)
        if not isinstance(name, str):
            raise TypeError("llm must be the annotation name (str) or a scorer with a .name")
        if scorer is None and runs is None:
            scorer = llm
    if scorer is None and runs is None:
        raise ValueError("a study needs an LLM scorer or ready-made context runs (scorer_or_runs)")
    return name, scorer, runs


def study_inputs(llm, scorer_or_runs, out_dir: str | os.PathLike,
                 cache) -> tuple[str, Any, list[ContextRun] | None, Path]:
    """What every study starts from: ``(llm name, scorer behind the cache or None, ready-made runs or None,
    the output folder, created)`` (:func:`split_scorer_or_runs`, then
    :func:`udcg_ltr.annotate.cache.open_cache` and :func:`udcg_ltr.annotate.annotator.with_cache`)."""
    name, scorer, runs = split_scorer_or_runs(llm, scorer_or_runs)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if scorer is not None:
        scorer = with_cache(scorer, open_cache(cache, name))
    return name, scorer, runs, out


def answer_contexts(records: Mapping[str, QueryRecord], contexts: Sequence[StudyContext], *, llm: str, scorer=None,
                    runs: Sequence[ContextRun] | None = None, rule: str = "contains", relevance_threshold: int = 1,
                    progress: bool = True) -> list[ContextRun]:
    """Graded runs for ``contexts`` (input order): answered by ``scorer``, or looked up in ``runs``.

    Looked-up runs are matched by ``(qid, passage ids in prompt order)`` and (re)graded with ``rule``;
    a context without a run is a :class:`DataError` (the message counts them).
    """
    if scorer is not None:
        return run_contexts(records, contexts, DedupScorer.wrap(scorer), llm_name=llm, rule=rule,
                            relevance_threshold=relevance_threshold, progress=progress)
    table: dict[tuple[str, tuple[str, ...]], ContextRun] = {}
    for r in runs or ():
        table.setdefault((r.qid, tuple(r.pids)), r)
    found, missing = [], []
    for c in contexts:
        r = table.get((c.qid, tuple(c.pids)))
        (found if r is not None else missing).append(r if r is not None else c)
    if missing:
        raise DataError(f"{len(missing)} of {len(contexts)} study contexts have no ready-made run "
                        f"(e.g. query {missing[0].qid!r}, passages {list(missing[0].pids)}); pass a scorer "
                        "to answer them")
    graded = grade_runs(records, found, rule=rule, relevance_threshold=relevance_threshold, regrade=True)
    return [ContextRun(qid=c.qid, context_id=c.context_id, pids=list(c.pids), answer=r.answer, llm=llm,
                       p_no_response=r.p_no_response, outcome=r.outcome, extra={**r.extra, "kind": c.kind})
            for c, r in zip(contexts, graded)]


# =============================================================================================
# query selection and passages


def order_by_splits(records: Sequence[QueryRecord], splits: Sequence[str] | None) -> list[QueryRecord]:
    """Records of ``splits`` in the order the splits are listed (input order within a split); all when ``None``."""
    if splits is None:
        return list(records)
    out: list[QueryRecord] = []
    for s in splits:
        out.extend(r for r in records if (r.split or "none") == s)
    return out


def select_queries(records: Sequence[QueryRecord], *, splits: Sequence[str] | None = None,
                   max_queries: int | None = None,
                   eligible: Callable[[QueryRecord], str | None] | None = None) -> tuple[list[QueryRecord], dict]:
    """Eligible records, split by split (see :func:`order_by_splits`), capped at ``max_queries``.

    ``eligible(record)`` returns ``None`` to keep a record or the reason it is left out; the
    reasons are counted in the returned info (``{"candidates", "excluded": {reason: n}, "selected"}``).
    """
    pool = order_by_splits(records, splits)
    excluded: dict[str, int] = {}
    kept = []
    for r in pool:
        reason = eligible(r) if eligible is not None else None
        if reason is None:
            kept.append(r)
        else:
            excluded[reason] = excluded.get(reason, 0) + 1
    if max_queries is not None:
        kept = kept[:max_queries]
    by_split: dict[str, int] = {}
    for r in kept:
        by_split[r.split or "none"] = by_split.get(r.split or "none", 0) + 1
    return kept, {"candidates": len(pool), "excluded": excluded, "selected": len(kept), "by_split": by_split,
                  "splits": list(splits) if splits is not None else "all"}


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
    """A study plot's title: what it shows, then the data set, the split(s) and the number of queries.

    ``by_split`` (queries per split, as :func:`select_queries` counts them) or ``split`` names the
    split(s); the second line reads e.g. ``"squad, split test: 60 queries, LLM qwen"``.
    """
    if by_split and len(by_split) == 1:
        where = f"split {next(iter(by_split))}"
    elif by_split:
        where = "splits " + " + ".join(f"{s} {n}" for s, n in by_split.items())
    else:
        where = f"split {split}" if split and split != "all" else "all splits"
    return (f"{what}\n{dataset or 'unnamed data set'}, {where}: {n_queries} queries"
            + (f", LLM {llm}" if llm else ""))


def distracting_effect(p: Passage, llm: str) -> float:
    """DE of an irrelevant passage: ``1 - P(NO-RESPONSE | q, p)`` (its negative utility's magnitude, Eq. 2)."""
    return 1.0 - p.p_no_response(llm)


# =============================================================================================
# outcomes and statistics


def outcome_indicators(runs: Sequence[ContextRun]) -> dict[str, np.ndarray]:
    """``{"correct": [n], "abstained": [n], "wrong": [n], "score": [n]}`` float arrays (score: 2/1/0)."""
    outcomes = [r.outcome for r in runs]
    out = {o: np.array([x == o for x in outcomes], dtype=np.float64) for o in OUTCOMES}
    out["score"] = np.array([Outcome(x).score for x in outcomes], dtype=np.float64)
    return out


def rate_ci(values, n_bootstrap: int, seed: int) -> tuple[float, float, float]:
    """``(mean, lo, hi)``: the mean over queries with its bootstrap percentile 95% interval."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return float("nan"), float("nan"), float("nan")
    lo, hi = bootstrap_ci(v, n_bootstrap, seed)
    return float(v.mean()), lo, hi


def paired_difference(a, b, n_bootstrap: int, seed: int) -> dict[str, float]:
    """``mean(a - b)`` over queries, its bootstrap 95% CI and the centred paired-bootstrap p."""
    t = paired_bootstrap_test(a, b, n_bootstrap, seed)
    return {"diff": t.mean_diff, "lo": t.lo, "hi": t.hi, "p_bootstrap": t.p_value, "n": t.n}


def wilcoxon_paired(a, b) -> dict[str, float]:
    """Wilcoxon signed-rank test of paired per-query values (``scipy.stats.wilcoxon``, two-sided).

    Zero differences are dropped (``zero_method="wilcox"``); ``n_nonzero`` says how many pairs
    remained. When none differ the test is undefined: ``p = 1`` and ``statistic = NaN``.
    """
    from scipy.stats import wilcoxon

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    d = a - b
    nonzero = int(np.count_nonzero(d))
    if nonzero == 0:
        return {"statistic": float("nan"), "p": 1.0, "n_nonzero": 0}
    res = wilcoxon(a, b, zero_method="wilcox", alternative="two-sided")
    return {"statistic": float(res.statistic), "p": float(res.pvalue), "n_nonzero": nonzero}


def mcnemar_exact(a, b) -> dict[str, float]:
    """McNemar's exact test on paired binary outcomes: ``b01`` = a true and b false, ``b10`` the reverse;
    two-sided binomial test of ``b01`` among the discordant pairs at p = 0.5 (p = 1 without discordance)."""
    from scipy.stats import binomtest

    a = np.asarray(a, dtype=bool)
    b = np.asarray(b, dtype=bool)
    only_a = int((a & ~b).sum())
    only_b = int((~a & b).sum())
    n = only_a + only_b
    p = 1.0 if n == 0 else float(binomtest(only_a, n, 0.5, alternative="two-sided").pvalue)
    return {"only_a": only_a, "only_b": only_b, "p": p}


def cochran_q(matrix) -> dict[str, float]:
    """Cochran's Q test that ``k`` related binary samples (columns of ``[n, k]``) share one success rate.

    ``Q = (k - 1) (k sum_j C_j^2 - N^2) / (k N - sum_i R_i^2)`` with column sums ``C_j``, row sums
    ``R_i`` and ``N`` the total; ``p`` from chi-square with ``k - 1`` degrees of freedom. Undefined
    (NaN, p = 1) when every row is constant.
    """
    from scipy.stats import chi2

    x = np.asarray(matrix, dtype=np.float64)
    n, k = x.shape
    col = x.sum(axis=0)
    row = x.sum(axis=1)
    total = row.sum()
    denom = k * total - (row ** 2).sum()
    if k < 2 or denom <= 0:
        return {"Q": float("nan"), "df": k - 1, "p": 1.0}
    q = (k - 1) * (k * (col ** 2).sum() - total ** 2) / denom
    return {"Q": float(q), "df": k - 1, "p": float(chi2.sf(q, k - 1))}


def paired_ratio_ci(a, b, n_bootstrap: int, seed: int, confidence: float = 0.95) -> tuple[float, float, float]:
    """``mean(a) / mean(b)`` with a percentile CI from resampling the same queries for both
    (``(nan, nan, nan)`` when ``mean(b) = 0``; resamples with a zero denominator are dropped)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.size == 0 or b.mean() == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.size, size=(n_bootstrap, a.size))
    num, den = a[idx].mean(axis=1), b[idx].mean(axis=1)
    ok = den > 0
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(num[ok] / den[ok], [tail, 1.0 - tail]) if ok.any() else (np.nan, np.nan)
    return float(a.mean() / b.mean()), float(lo), float(hi)


def fmt_pct(x, digits: int = 1) -> str:
    """A rate as percentage points (``41.3``); NA for NaN."""
    return "NA" if x is None or _isnan(x) else f"{100.0 * float(x):.{digits}f}"


def fmt_pct_ci(v, lo, hi, digits: int = 1) -> str:
    """``41.3 [35.0, 47.2]`` in percentage points."""
    if v is None or _isnan(v):
        return "NA"
    return f"{fmt_pct(v, digits)} [{fmt_pct(lo, digits)}, {fmt_pct(hi, digits)}]"


def runs_csv_rows(runs: Sequence[ContextRun]) -> list[dict[str, Any]]:
    """Flat rows of graded runs (for the per-context CSV)."""
    return [{"qid": r.qid, "context_id": r.context_id, "kind": r.extra.get("kind"), "pids": " ".join(r.pids),
             "outcome": r.outcome, "p_no_response": r.p_no_response, "answer": r.answer} for r in runs]
