"""Context-size sensitivity: each metric's correlation with end-to-end accuracy for k = 1..10 (UDCG paper, Figure 2).

A thin wrapper over the correlation study's k sweep (:func:`udcg_ltr.studies.correlation.k_sweep_rows`): for every
context size ``k``, the mean per-query Spearman correlation of each metric with the graded outcomes on the
``report_split`` queries, with bootstrap 95% CIs. ``mode="resample"`` (with a scorer; the paper's protocol): fresh
balanced contexts of ``k`` passages per query and ``k``, answered through the cache; ``"truncate"``: shared contexts cut
to their first ``k`` passages (with runs only, each keeps the outcome of the full context; with a scorer, contexts
sampled at ``max(k_values)`` and answered again at every ``k``); ``"auto"``: resample with a scorer, truncate with runs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from udcg_ltr.annotate.annotator import deduped, ensure_annotations
from udcg_ltr.annotate.end_to_end import grade_runs, run_contexts
from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.fit.gamma import DEFAULT_GAMMA_GRID
from udcg_ltr.fit.sampling import ContextSamplingConfig, sample_contexts
from udcg_ltr.report import Column, fmt_ci, write_csv
from udcg_ltr.studies import common
from udcg_ltr.studies.correlation import (
    DEFAULT_METRICS,
    StudySpec,
    SweepSpec,
    k_sweep_rows,
    plot_k_sweep,
    query_splits,
    row_label,
)

#: The metrics of the paper's Figure 2 (any of the correlation study's row keys may be asked for).
FIGURE_METRICS = ("udcg", "udcg_theta", "ndcg", "mrr", "map", "precision", "erag")


@dataclass(frozen=True)
class ContextSizeConfig(common.StudyParams):
    """Parameters of :func:`run_context_size`. ``k_values``: context sizes (truncate mode keeps those up to
    the longest run); ``metrics``: row keys of the correlation study; ``n_contexts``, ``top_n``,
    ``positive_fraction``: the context sampling of resample mode; ``fit_splits`` / ``report_split``: as in
    :func:`~udcg_ltr.studies.correlation.run_correlation_study`."""

    k_values: tuple[int, ...] = tuple(range(1, 11))
    metrics: tuple[str, ...] = FIGURE_METRICS
    mode: str = "auto"
    n_contexts: int = 10
    top_n: int = 25
    positive_fraction: float = 0.5
    fit_splits: tuple[str, ...] = ("train", "val")
    report_split: str | None = "test"
    C: float = 1.0
    erag_rule: str = "contains"

    def __post_init__(self):
        object.__setattr__(self, "k_values", tuple(int(k) for k in self.k_values))
        object.__setattr__(self, "metrics", tuple(self.metrics))
        object.__setattr__(self, "fit_splits", tuple(self.fit_splits))
        if not self.k_values or min(self.k_values) < 1:
            raise ValueError(f"k_values must be positive, got {self.k_values}")
        if self.mode not in ("auto", "resample", "truncate"):
            raise ValueError(f"mode must be auto / resample / truncate, got {self.mode!r}")
        bad = set(self.metrics) - set(DEFAULT_METRICS)
        if bad or not self.metrics:
            raise ValueError(f"unknown metrics {sorted(bad)} (known: {DEFAULT_METRICS})")


def run_context_size(records: Sequence[QueryRecord], scorer_or_runs=None, *, llm, out_dir: str | os.PathLike,
                     logger=None, cache=True, progress: bool = True, **params) -> common.StudyReport:
    """Correlation with end-to-end accuracy by context size for each metric (UDCG paper, Figure 2).

    Args: as :func:`udcg_ltr.studies.distractors.run_distractor_sensitivity`, with :class:`ContextSizeConfig`
    fields. ``rows``: one per metric, ``"k=<k>"`` keys holding the mean per-query Spearman."""
    cfg = common.config_from(params, ContextSizeConfig)
    name, runner, runs, out = common.study_inputs(llm, scorer_or_runs, out_dir, cache)
    mode = cfg.mode if cfg.mode != "auto" else ("resample" if runner is not None else "truncate")
    if mode == "resample" and runner is None:
        raise ValueError("mode='resample' needs an LLM scorer (the contexts of every k must be answered)")
    answerer = deduped(runner)  # the k sweep's contexts: each distinct prompt once per call
    selected, info = _selected_queries(records, cfg, runs)
    fields = ["p_no_response"] + (["answer_alone"] if "erag" in cfg.metrics else [])
    ann = ensure_annotations(selected, name, fields, runner, progress=progress)
    by_qid = {r.qid: r for r in selected}
    split_of, split_note = query_splits(by_qid, cfg.seed)
    report_split = cfg.report_split if cfg.report_split not in (None, "all") else None
    if report_split is not None and report_split not in set(split_of.values()):
        raise ValueError(f"no selected query in the report split {report_split!r} (splits: {sorted(set(split_of.values()))})")
    sampling = ContextSamplingConfig(n_contexts=cfg.n_contexts, k=max(cfg.k_values), top_n=cfg.top_n,
                                     positive_fraction=cfg.positive_fraction, seed=cfg.seed,
                                     relevance_threshold=cfg.relevance_threshold)
    base_runs, k_values = _base_runs(cfg, mode, runs, selected, by_qid, sampling, info, answerer=answerer,
                                     name=name, progress=progress)
    spec = StudySpec(fit_splits=cfg.fit_splits, report_split=report_split, metrics=list(cfg.metrics), C=cfg.C,
                     gamma_grid=DEFAULT_GAMMA_GRID, n_bootstrap=cfg.n_bootstrap, seed=cfg.seed,
                     relevance_threshold=cfg.relevance_threshold, rule=cfg.rule, erag_rule=cfg.erag_rule)
    sweep = k_sweep_rows(by_qid, base_runs, llm=name, sweep=SweepSpec(k_values, mode, sampling), spec=spec,
                         split_of=split_of, scorer=answerer if (mode == "resample" or runs is None) else None,
                         cache=None, progress=progress)
    if not sweep:
        raise ValueError("the k sweep produced no rows (no contexts)")
    by_k = _by_size(sweep, cfg.metrics)
    paths: dict[str, Any] = {}
    table_md, queries_md = _write_tables(paths, out, sweep, by_k, mode=mode, report_split=report_split)
    title = common.plot_title(f"Metric-accuracy correlation vs k ({mode}; outcome: {by_k.source})",
                              dataset=cfg.dataset, n_queries=by_k.n_report, llm=name, split=report_split or "all")
    paths["png"] = plot_k_sweep(sweep, out / "context_size.png", metrics=by_k.names, title=title)
    meta = {"study": "context_size", "llm": name, "config": asdict(cfg), "mode": mode, "outcome_source": by_k.source,
            "k_values": by_k.ks, "n_queries": by_k.n_report, "n_selected_queries": len(selected),
            "queries_by_k": by_k.queries_by_k, "defined_by_k": by_k.defined_by_k, "report_split": report_split or "all",
            "fit_splits": list(cfg.fit_splits), "split_note": split_note, "selection": info, "annotations": ann,
            "n_base_contexts": len(base_runs)}
    scalars = {**{f"spearman/{r['metric']}/k={k}": r[f"k={k}"] for r in by_k.rows for k in by_k.ks},
               "n_queries": by_k.n_report}
    md = _markdown(cfg, name, mode, by_k, info, split_note=split_note, report_split=report_split,
                   tables_md=(table_md, queries_md), sweep_csv=paths["sweep_csv"].name)
    report = common.StudyReport(name="context_size", rows=by_k.rows, markdown=md, paths=paths,
                                meta=meta, tables={"table": by_k.rows, "sweep": sweep}, scalars=scalars)
    return common.finish_report(report, out, logger)


def _selected_queries(records: Sequence[QueryRecord], cfg: ContextSizeConfig, runs) -> tuple[list, dict]:
    """The study's queries (those with ready-made runs, when runs are given) and the selection info."""
    run_qids = {r.qid for r in runs} if runs is not None else None
    selected, info = common.select_queries(records, splits=cfg.splits, max_queries=cfg.max_queries, eligible=(
        lambda r: None if (run_qids is None or r.qid in run_qids) else "no ready-made runs"))
    if not selected:
        raise ValueError("no query for the context-size study")
    return selected, info


def _base_runs(cfg: ContextSizeConfig, mode: str, runs, selected, by_qid, sampling: ContextSamplingConfig, info, *,
               answerer, name: str, progress: bool) -> tuple[list, list[int]]:
    """The contexts truncate mode cuts at every k (the ready-made runs, graded, or fresh ones the LLM answers; none
    in resample mode) and the k values left (those no longer than the runs' contexts, noted in ``info``)."""
    k_values = list(cfg.k_values)
    base_runs: list = []
    if mode == "truncate" and runs is not None:
        base_runs = grade_runs(by_qid, [r for r in runs if r.qid in by_qid], rule=cfg.rule,
                               relevance_threshold=cfg.relevance_threshold)
        longest = max(len(r.pids) for r in base_runs)
        info["k_dropped_longer_than_runs"] = [k for k in k_values if k > longest]
        k_values = [k for k in k_values if k <= longest]
    elif mode == "truncate":
        base_runs = run_contexts(by_qid, sample_contexts(selected, sampling), answerer, None,
                                 llm_name=name, rule=cfg.rule, relevance_threshold=cfg.relevance_threshold,
                                 progress=progress)
    return base_runs, k_values


@dataclass
class _BySize:
    """The k sweep's rows arranged by metric and k."""

    source: str  # where the outcomes come from: "llm" or "full_context"
    ks: list[int]
    by_metric_k: dict[tuple[str, int], dict[str, Any]]
    names: list[str]  # the metrics with rows, in the configured order
    rows: list[dict[str, Any]]  # per metric: {"metric", "k=<k>": mean per-query Spearman}
    queries_by_k: dict[int, int]
    defined_by_k: dict[int, dict[str, int]]

    @property
    def n_report(self) -> int:
        return max(self.queries_by_k.values())


def _by_size(sweep: Sequence[dict[str, Any]], metrics: Sequence[str]) -> _BySize:
    ks = sorted({r["k"] for r in sweep})
    by_metric_k = {(r["metric"], r["k"]): r for r in sweep}
    names = [m for m in metrics if any(r["metric"] == m for r in sweep)]
    rows = [{"metric": m, **{f"k={k}": by_metric_k[m, k]["spearman"] if (m, k) in by_metric_k else float("nan")
                             for k in ks}} for m in names]
    return _BySize(source=sweep[0]["outcome_source"], ks=ks, by_metric_k=by_metric_k, names=names, rows=rows,
                   queries_by_k={k: max((r["n"] + r["n_na"] for r in sweep if r["k"] == k), default=0) for k in ks},
                   defined_by_k={k: {r["metric"]: r["n"] for r in sweep if r["k"] == k} for k in ks})


def _write_tables(paths: dict[str, Any], out, sweep, by_k: _BySize, *, mode: str,
                  report_split: str | None) -> tuple[str, str]:
    """The correlation table and the defined-queries table (markdown + CSV) and the sweep CSV, into ``paths``;
    returns both tables' markdown."""
    ks = by_k.ks
    k_columns = ["metric"] + [f"k={k}" for k in ks]
    ci = {key: fmt_ci(r["spearman"], r["spearman_lo"], r["spearman_hi"], 2) for key, r in by_k.by_metric_k.items()}
    # Markdown shows each row's label (row_label), the CSV its key
    rendered = [{**row, "label": row_label(row["metric"]), **{f"ci{k}": ci.get((row["metric"], k), "NA") for k in ks}}
                for row in by_k.rows]
    note = (f"Mean per-query Spearman between the metric and the graded outcome, {report_split or 'all'} queries "
            f"({', '.join(f'k={k}: {by_k.queries_by_k[k]}' for k in ks)} queries; NA queries left out). Mode: {mode}; "
            f"outcome from: {by_k.source}.")
    table_md = common.add_table(paths, "table", out / "context_size", rendered,
                                [Column("label", "Metric")] + [Column(f"ci{k}", f"k={k}") for k in ks],
                                note=note, csv_columns=k_columns,
                                title="Correlation with end-to-end accuracy by context size (mean per-query "
                                      "Spearman [95% CI])")
    n_rows = [{"metric": m, "label": row_label(m), **{f"k={k}": by_k.defined_by_k[k].get(m) for k in ks}}
              for m in by_k.names]
    queries_md = common.add_table(paths, "queries", out / "context_size_queries", n_rows,
                                  [Column("label", "Metric")] + [Column(f"k={k}", f"k={k}") for k in ks],
                                  title="Queries with a defined correlation (neither side constant)",
                                  csv_columns=k_columns)
    paths["sweep_csv"] = write_csv(out / "context_size_sweep.csv", sweep)
    return table_md, queries_md


def _markdown(cfg: ContextSizeConfig, name: str, mode: str, by_k: _BySize, info, *, split_note, report_split,
              tables_md: tuple[str, str], sweep_csv: str) -> str:
    ks, table_md, queries_md = by_k.ks, *tables_md
    lines = [f"# Context-size sensitivity (UDCG paper, Figure 2): LLM `{name}`", "",
             f"- Mode: {mode} (outcome from: {by_k.source}); k = {ks}.",
             f"- Queries: {common.describe_selection(info, cfg.max_queries)}; correlations on the "
             f"{report_split or 'all'} queries ({by_k.n_report} with contexts; per k: {by_k.queries_by_k}); "
             f"UDCG_theta / gamma* fitted on {list(cfg.fit_splits)} at each k.",
             *([f"- Note: {split_note}."] if split_note else []),
             *([f"- Truncation: the shared contexts hold at most {max(ks)} passages; k = {info['k_dropped_longer_than_runs']}"
                " left out."] if info.get("k_dropped_longer_than_runs") else []),
             *(["- Truncate mode without an LLM: metric@k is compared with the outcome of the full context, so "
                "small k measures how well the first k passages predict the full-context answer."]
               if by_k.source == "full_context" else []),
             "", table_md, "", queries_md, "",
             f"Statistics: per-query Spearman (NA when a side is constant), mean over queries with bootstrap 95% CIs "
             f"({cfg.n_bootstrap} resamples) in `{sweep_csv}`."]
    return "\n".join(lines) + "\n"
