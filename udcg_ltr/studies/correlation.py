"""The metric / end-to-end accuracy correlation study (the UDCG paper's central experiment).

For every query, several contexts (``k`` passages in prompt order) were answered by the LLM and graded
correct (2) > abstained (1) > wrong (0). The per-query Spearman and Kendall tau-b correlation between a
metric's order of the contexts and this ideal order says how well the metric predicts end-to-end quality
(NA where either side is constant: counted, never averaged); means over queries come with bootstrap 95%
intervals and a paired bootstrap test of UDCG against every other metric.

UDCG_theta and the calibrated gamma are fitted on the ``fit_splits`` queries only, the headline table uses the
``report_split`` queries (the all-queries table is in-sample for those two rows; the report says so).

A row's key (its :data:`~udcg_ltr.metrics.table.METRIC_NAMES` key, or one of :data:`STUDY_ROWS`) names it in
summaries, CSV, JSON and W&B; Markdown and plots show :func:`row_label`; :data:`METRIC_NOTES` (the report's
Definitions) says how each row is computed.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.annotate.end_to_end import grade_runs, run_contexts, run_summary
from udcg_ltr.data.contexts import OUTCOMES
from udcg_ltr.data.schema import QueryRecord, records_by_qid
from udcg_ltr.fit.gamma import DEFAULT_GAMMA_GRID, GammaCalibration, calibrate_gamma, plot_gamma_curve
from udcg_ltr.fit.pairs import ContextTable, build_context_table, outcome_score
from udcg_ltr.fit.sampling import ContextSamplingConfig, sample_contexts, truncate_contexts
from udcg_ltr.fit.theta import fit_udcg_theta, select_C, weights_rows
from udcg_ltr.fit.weights import VARIANT_NAMES, UDCGThetaWeights, plot_weights, save_weights
from udcg_ltr.io import atomic_write_json, atomic_write_text, json_safe
from udcg_ltr.metrics import classic
from udcg_ltr.metrics.erag import erag_labels, graded_precision
from udcg_ltr.metrics.setbased import ra_nwg
from udcg_ltr.metrics.table import display_name
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA, udcg
from udcg_ltr.report import (
    Column,
    fmt_ci,
    fmt_float,
    fmt_p,
    markdown_table,
    plot_bars,
    plot_lines,
    table_cell,
    write_csv,
)
from udcg_ltr.stats.bootstrap import paired_bootstrap_test, rate_ci
from udcg_ltr.stats.correlation import QueryCorrelations, per_query_correlations
from udcg_ltr.stats.groups import group_index
from udcg_ltr.studies.common import StudyReport, add_table, annotation_name

#: UDCG_theta feature variant (:func:`udcg_ltr.fit.theta.fit_udcg_theta`) -> its row.
THETA_ROWS = {"full": "udcg_theta", "relevance_only": "udcg_theta_relevance_only", "binary": "udcg_theta_binary"}
#: The study-only rows (no column of the metric table), key -> label.
STUDY_ROWS: dict[str, str] = {
    "udcg_gamma_star": "UDCG (gamma*)",  # Eq. 4 with gamma calibrated on the fit split
    # Eq. 3 ablations (no u- features; u+ replaced by binary relevance): the fit's own variant names
    **{THETA_ROWS[v]: VARIANT_NAMES[v] for v in ("relevance_only", "binary")},
    "answer_prob": "ANSWER_PROB",  # mean log-likelihood of the gold answer
    "random": "random",  # seeded uniform scores: the chance level
}
#: The reference row of the paired tests (and of the ``*_vs_udcg`` / ``udcg_gain_pct`` columns).
REFERENCE = "udcg"
DEFAULT_METRICS: tuple[str, ...] = ("udcg", "udcg_gamma_star", "udcg_theta", "udcg_theta_relevance_only",
                                    "udcg_theta_binary", "ndcg", "mrr", "map", "precision", "hits", "erag",
                                    "answer_prob", "ra_nwg", "random")
#: Metrics drawn in the k-sweep figure.
SWEEP_METRICS: tuple[str, ...] = ("udcg", "udcg_gamma_star", "udcg_theta", "ndcg", "mrr", "precision", "erag", "ra_nwg")
#: The rows of the bench line ``spearman: udcg=... udcg_theta=... ndcg=... precision=... erag=...``.
BENCH_LINE_METRICS: tuple[str, ...] = ("udcg", "udcg_theta", "ndcg", "precision", "erag")


def row_label(key: str) -> str:
    """The label Markdown tables and plots show for a study row: :data:`STUDY_ROWS`' label, else the metric
    table's display name (``ndcg`` -> ``nDCG``); the key itself for anything else."""
    return STUDY_ROWS.get(key) or display_name(key)


METRIC_NOTES = """\
- Ideal order: outcome scores correct = 2, abstained = 1, wrong = 0 (correct requires a relevant passage in the context).
- Per query: Spearman's rho (average ranks for ties) and Kendall's tau-b; NA when either side is constant; metric values
  equal to 12 decimals are ties.
- UDCG (udcg): Eq. 4, gamma = 1/3 (paper default; the reference row of the paired tests). UDCG (gamma*)
  (udcg_gamma_star): gamma calibrated on the fit split.
- UDCG_theta (udcg_theta): Eq. 3, positional weights fitted by pairwise hinge SVM-rank on the fit split; (rel-only)
  (udcg_theta_relevance_only): no u- features; (binary) (udcg_theta_binary): u+ replaced by binary relevance.
- nDCG@k: binary gains, IDCG@k from the query's judged pool (its whole candidate list); MAP: AP@k with R from the pool.
- eRAG: mean over the context's passages of the single-passage answer (answer_alone) graded against the gold answers
  with the outcome's rule (whole-token containment); metrics.erag labels + graded Precision@k.
- ANSWER_PROB (answer_prob): mean per-passage log-likelihood of the gold answer (annotation answer_logprob); NA without it.
- RA-nWG@k: binary relevance mapped to grade 5 (relevant) or 0 (not relevant); weights and ideal from the judged pool.
- random: seeded uniform scores (chance level).
- CI: bootstrap percentile 95% interval of the mean over queries; p: paired bootstrap test (centred, two-sided) of
  UDCG against the row's metric on the queries where both are defined.
"""


def _pool_rows(table: ContextTable, by_qid: Mapping[str, QueryRecord], relevance_threshold: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each context row's query pool (retrieval order): ``(binary relevance, mask, relevant count)``."""
    qids = list(dict.fromkeys(table.qids.tolist()))
    pools = [[p.is_relevant(relevance_threshold) for p in by_qid[q].passages] for q in qids]
    lengths = np.array([len(p) for p in pools], dtype=np.int64)
    mask = np.arange(lengths.max(initial=0)) < lengths[:, None]
    rel = np.zeros(mask.shape, dtype=bool)
    rel[mask] = [x for pool in pools for x in pool]  # row-major: each query's pool in retrieval order
    row_of = {q: i for i, q in enumerate(qids)}
    rows = np.array([row_of[q] for q in table.qids.tolist()], dtype=np.int64)
    return rel[rows], mask[rows], rel.sum(axis=1)[rows].astype(np.float64)


def _passage_field(table: ContextTable, by_qid: Mapping[str, QueryRecord], key: str) -> np.ndarray:
    """Per-passage annotation ``key`` of ``table.llm`` as an object array ``[n, k]`` (None when absent)."""
    out = np.full(table.pids.shape, None, dtype=object)
    passages = {q: {p.pid: p for p in by_qid[q].passages} for q in set(table.qids.tolist())}
    for r, q in enumerate(table.qids.tolist()):
        for j in np.flatnonzero(table.mask[r]):
            out[r, j] = passages[q][table.pids[r, j]].annotations.get(table.llm, {}).get(key)
    return out


def compute_context_metrics(table: ContextTable, records: Mapping[str, QueryRecord] | Sequence[QueryRecord], *,
                            gamma: float = DEFAULT_GAMMA, gamma_star: float | None = None,
                            theta: Mapping[str, UDCGThetaWeights] | None = None, metrics: Sequence[str] | None = None,
                            erag_rule: str = "contains", relevance_threshold: int = 1, seed: int = 0
                            ) -> dict[str, np.ndarray]:
    """Every requested metric (row keys, :data:`DEFAULT_METRICS`) on every context of ``table`` (``[n]`` each;
    NaN = not computable). ``theta``: feature variant -> fitted weights; UDCG_theta rows without weights are
    skipped, as is ``udcg_gamma_star`` without ``gamma_star``."""
    by_qid = records_by_qid(records)
    wanted = list(metrics) if metrics is not None else list(DEFAULT_METRICS)
    theta = dict(theta or {})
    variant_of = {row: variant for variant, row in THETA_ROWS.items()}
    k, u, m, rel = table.k, table.utility, table.mask, table.relevant
    relf = rel.astype(np.float64)
    out: dict[str, np.ndarray] = {}
    if {"ndcg", "map", "ra_nwg"} & set(wanted):
        pool_rel, pool_mask, pool_n_relevant = _pool_rows(table, by_qid, relevance_threshold)
    for name in wanted:
        if name == "udcg":
            out[name] = udcg(u, m, gamma=gamma)
        elif name == "udcg_gamma_star":
            if gamma_star is not None:
                out[name] = udcg(u, m, gamma=gamma_star)
        elif name in variant_of:
            if variant_of[name] in theta:
                out[name] = theta[variant_of[name]].score(u, m, relevant=rel)
        elif name == "ndcg":
            out[name] = classic.ndcg(relf, m, k=k, ideal_gains=pool_rel.astype(np.float64), ideal_mask=pool_mask)
        elif name == "mrr":
            out[name] = classic.reciprocal_rank(relf, m)
        elif name == "map":
            out[name] = classic.average_precision(relf, m, k=k, n_relevant=pool_n_relevant)
        elif name == "precision":
            out[name] = classic.precision(relf, m, k=k)
        elif name == "hits":
            out[name] = classic.hits(relf, m)
        elif name == "erag":
            alone = _passage_field(table, by_qid, "answer_alone")
            gold = [by_qid[q].answers for q in table.qids.tolist()]
            labels = erag_labels([list(row) for row in alone], gold, erag_rule, width=k)
            vals = graded_precision(np.nan_to_num(labels), m, k=k)
            out[name] = np.where((m & np.isnan(labels)).any(axis=1), np.nan, vals)
        elif name == "answer_prob":
            field = _passage_field(table, by_qid, "answer_logprob").ravel()
            lp = np.array([np.nan if v is None else float(v) for v in field]).reshape(table.pids.shape)
            with np.errstate(invalid="ignore", divide="ignore"):  # NaN: a missing annotation, or no passage
                out[name] = np.where(m, lp, 0.0).sum(axis=1) / m.sum(axis=1)  # mean over the real entries
        elif name == "ra_nwg":
            out[name] = ra_nwg(np.where(rel, 5, 0), m, k=k, pool_grades=np.where(pool_rel, 5, 0), pool_mask=pool_mask)
        elif name == "random":
            rng = np.random.default_rng([seed & 0xFFFFFFFF, zlib.crc32(b"RANDOM")])  # the stream of earlier runs
            out[name] = rng.random(len(table))
        else:
            raise ValueError(f"unknown metric {name!r} (known: {DEFAULT_METRICS})")
    return out


def summarise(correlations: Mapping[str, QueryCorrelations], select: np.ndarray, *, reference: str = REFERENCE,
              n_bootstrap: int = 1000, seed: int = 0, na_policy: str = "na") -> list[dict[str, Any]]:
    """One row per metric over the selected queries: means, 95% CIs, n / NA, paired tests vs ``reference``;
    ``na_policy="zero"``: a metric constant over a query whose outcomes vary gets 0 instead of NA."""
    if na_policy not in ("na", "zero"):
        raise ValueError(f"na_policy must be 'na' or 'zero', got {na_policy!r}")

    def values(name, method):
        qc = correlations[name]
        v = getattr(qc, method)
        if na_policy == "zero":
            v = np.where(np.isnan(v) & qc.metric_constant & ~qc.outcome_constant, 0.0, v)
        return v[select]

    rows = []
    for name in correlations:
        row: dict[str, Any] = {"metric": name}
        paired = reference in correlations and name != reference
        for method in ("spearman", "kendall"):
            v = values(name, method)
            ok = ~np.isnan(v)
            row[method], row[f"{method}_lo"], row[f"{method}_hi"] = rate_ci(v, n_bootstrap, seed)
            row[f"{method}_n"], row[f"{method}_na"] = int(ok.sum()), int((~ok).sum())
            test = paired_bootstrap_test(values(reference, method), v, n_bootstrap, seed) if paired else None
            row[f"{method}_p_vs_{reference}"] = test.p_value if test else None
            row[f"{method}_diff_vs_{reference}"] = test.mean_diff if test else None  # reference minus this metric
            row[f"{method}_paired_n"] = test.n if test else None
        # Relative gain of the reference over this metric, on the queries where both are defined (the
        # raw means may average different query subsets); left out when the metric's mean is near 0.
        row[f"{reference}_gain_pct"] = float("nan")
        if paired:
            a, b = values(reference, "spearman"), values(name, "spearman")
            both = ~np.isnan(a) & ~np.isnan(b)
            if both.any() and b[both].mean() >= 0.1:
                row[f"{reference}_gain_pct"] = 100.0 * (a[both].mean() - b[both].mean()) / b[both].mean()
        rows.append(row)
    return rows


_MD_COLUMNS = [Column("metric", "Metric", row_label), Column("spearman_txt", "Spearman [95% CI]"),
               Column(f"spearman_p_vs_{REFERENCE}", f"p vs {row_label(REFERENCE)}", fmt_p),
               Column("kendall_txt", "Kendall tau-b [95% CI]"),
               Column(f"kendall_p_vs_{REFERENCE}", f"p vs {row_label(REFERENCE)}", fmt_p),
               Column("n", "queries (NA)"), Column("gain", f"{row_label(REFERENCE)} vs metric (paired)")]
_CSV_COLUMNS = ["metric"] + [f"{m}{s}" for m in ("spearman", "kendall") for s in (
    "", "_lo", "_hi", "_n", "_na", f"_p_vs_{REFERENCE}", f"_diff_vs_{REFERENCE}")] + [f"{REFERENCE}_gain_pct"]


def _rendered(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """:func:`summarise` rows with the text cells of :data:`_MD_COLUMNS` added."""
    gain = f"{REFERENCE}_gain_pct"
    return [{**r, "gain": "-" if r["metric"] == REFERENCE or table_cell(r.get(gain)) is None
             else f"{r[gain]:+.0f}%", "n": f"{r['spearman_n']} ({r['spearman_na']})",
             **{f"{m}_txt": fmt_ci(r[m], r[f"{m}_lo"], r[f"{m}_hi"]) for m in ("spearman", "kendall")}} for r in rows]


def correlation_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The paper-layout markdown table of :func:`summarise` rows (metrics shown by :func:`row_label`)."""
    return markdown_table(_rendered(rows), _MD_COLUMNS)


@dataclass
class CorrelationReport(StudyReport):
    """Everything the study produced; ``rows`` is the report-split summary (the headline table), ``tables`` every
    table logged (summaries, per-query correlations, k sweep, UDCG_theta weights)."""

    per_query: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # "report" (the report split), "all" ...
    k_sweep: list[dict[str, Any]] = field(default_factory=list)
    weights: dict[str, UDCGThetaWeights] = field(default_factory=dict)
    gamma: GammaCalibration | None = None

    def row(self, metric: str, split: str = "report") -> dict[str, Any]:
        for r in self.summary[split]:
            if r["metric"] == metric:
                return r
        raise KeyError(f"no metric {metric!r} in the {split!r} summary")

    def spearman(self, metric: str, split: str = "report") -> float:
        return float(self.row(metric, split)["spearman"])

    def bench_line(self, split: str = "report") -> str:
        """``spearman: udcg=A udcg_theta=B ndcg=C precision=D erag=E`` (3 decimals; NA when absent)."""
        known = {r["metric"] for r in self.summary.get(split, ())}
        return "spearman: " + " ".join(f"{key}={fmt_float(self.spearman(key, split)) if key in known else 'NA'}"
                                       for key in BENCH_LINE_METRICS)


def query_splits(records: Mapping[str, QueryRecord], seed: int) -> tuple[dict[str, str], str | None]:
    """Query -> split; when no record carries a split, a seeded 60/20/20 train/val/test hash split (noted)."""
    if any(r.split for r in records.values()):
        return {q: (r.split or "none") for q, r in records.items()}, None
    hashes = {q: zlib.crc32(f"{seed}:{q}".encode()) / 2 ** 32 for q in records}
    return ({q: "train" if h < 0.6 else ("val" if h < 0.8 else "test") for q, h in hashes.items()},
            "records carry no split: queries were split 60/20/20 by a seeded hash of their ids")


@dataclass(frozen=True)
class StudySpec:
    """The study's statistical design: UDCG_theta (``theta_variants``) and gamma* (over ``gamma_grid``) are fit
    on the ``fit_splits`` queries with the SVM-rank trade-off ``C`` (or ``"cv"``: :func:`udcg_ltr.fit.theta.select_C`
    on the fit split), then every metric of ``metrics`` (None: :data:`DEFAULT_METRICS`) is correlated with
    the end-to-end outcome on the ``report_split`` queries (``None`` / ``"all"``: every query), with
    ``n_bootstrap`` resamples and ``seed``. ``na_policy``: ``"na"`` or ``"zero"`` (a constant metric on a query
    whose outcomes vary counts 0). Contexts are graded with ``rule``, eRAG's labels with ``erag_rule``;
    relevance is a grade >= ``relevance_threshold``."""

    fit_splits: Sequence[str] = ("train", "val")
    report_split: str | None = "test"
    metrics: Sequence[str] | None = None
    theta_variants: Sequence[str] = ("full", "relevance_only", "binary")
    gamma_grid: Sequence[float] = DEFAULT_GAMMA_GRID
    C: float | str = 1.0
    n_bootstrap: int = 1000
    seed: int = 0
    na_policy: str = "na"
    relevance_threshold: int = 1
    rule: str = "contains"
    erag_rule: str = "contains"

    def __post_init__(self) -> None:
        object.__setattr__(self, "fit_splits", tuple(self.fit_splits))
        object.__setattr__(self, "metrics", DEFAULT_METRICS if self.metrics is None else tuple(self.metrics))
        object.__setattr__(self, "theta_variants", tuple(self.theta_variants))
        if unknown := [v for v in self.theta_variants if v not in THETA_ROWS]:
            raise ValueError(f"theta_variants: unknown {unknown} (known: {', '.join(THETA_ROWS)})")


@dataclass(frozen=True)
class SweepSpec:
    """The context-size sensitivity sweep (:func:`k_sweep_rows`): the sizes ``k_values`` (empty: no sweep),
    ``mode`` ``"truncate"`` (the runs' contexts cut to k) or ``"resample"`` (fresh contexts drawn by
    ``sampling``, answered by the LLM)."""

    k_values: Sequence[int] = ()
    mode: str = "truncate"
    sampling: ContextSamplingConfig | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "k_values", tuple(int(k) for k in self.k_values))
        if self.mode not in ("truncate", "resample"):
            raise ValueError(f"mode must be 'truncate' or 'resample', got {self.mode!r}")


@dataclass
class _Core:
    correlations: dict[str, QueryCorrelations]
    groups: np.ndarray
    theta: dict[str, UDCGThetaWeights]
    gamma: GammaCalibration | None


def _core(table: ContextTable, by_qid, split_of: Mapping[str, str], spec: StudySpec) -> _Core:
    """Fit UDCG_theta and gamma* on the ``spec.fit_splits`` contexts, then score and correlate every metric."""
    fit_splits, metrics = spec.fit_splits, spec.metrics
    fit_table = table.subset(np.flatnonzero([split_of[q] in fit_splits for q in table.qids.tolist()]))
    theta: dict[str, UDCGThetaWeights] = {}
    for v in spec.theta_variants if len(fit_table) else ():
        if THETA_ROWS[v] in metrics:
            # "cv": chosen by query-grouped CV inside the fit split only
            c_v, cv_rows = select_C(fit_table, variant=v, seed=spec.seed) if spec.C == "cv" else (spec.C, None)
            meta = {"fit_splits": list(fit_splits), **({"C_cv": cv_rows} if cv_rows else {})}
            theta[v] = fit_udcg_theta(fit_table, variant=v, C=c_v, meta=meta)
    gamma = None if not len(fit_table) or "udcg_gamma_star" not in metrics else calibrate_gamma(
        fit_table.utility, fit_table.mask, fit_table.outcome, fit_table.qids, grid=spec.gamma_grid)
    values = compute_context_metrics(table, by_qid, gamma_star=gamma.gamma if gamma else None, theta=theta,
                                     metrics=metrics, erag_rule=spec.erag_rule,
                                     relevance_threshold=spec.relevance_threshold, seed=spec.seed)
    gi = group_index(table.qids)
    corr = {name: per_query_correlations(table.qids, v, table.outcome, groups_idx=gi) for name, v in values.items()}
    return _Core(correlations=corr, groups=gi[0], theta=theta, gamma=gamma)


def _select(groups: np.ndarray, split_of: Mapping[str, str], split: str | None) -> np.ndarray:
    return np.array([split in (None, "all") or split_of[q] == split for q in groups.tolist()], dtype=bool)


def k_sweep_rows(records, runs, *, llm: str, sweep: SweepSpec, spec: StudySpec, split_of: Mapping[str, str],
                 scorer=None, cache=None, progress: bool = True) -> list[dict[str, Any]]:
    """Correlation (``spec.report_split``) of each of ``spec.metrics`` for contexts of ``k`` passages, for every
    ``k`` of ``sweep`` (UDCG_theta: the full variant only). Truncate mode: each context cut to its first ``k``
    passages, answered again by a ``scorer``, or without one keeping the full context's outcome
    (``outcome_source="full_context"``); resample mode: fresh balanced contexts of ``k`` passages
    (``sweep.sampling``) answered by the ``scorer`` (required)."""
    from tqdm.auto import tqdm

    by_qid = records_by_qid(records)
    mode, threshold = sweep.mode, spec.relevance_threshold
    if mode == "resample" and scorer is None:
        raise ValueError("mode='resample' needs a scorer (the LLM must answer the new contexts)")
    full_only = replace(spec, theta_variants=("full",))
    rows = []
    for k in tqdm(list(sweep.k_values), desc=f"k sweep ({mode})", disable=not progress):
        if scorer is not None:  # the LLM answers fresh contexts of k passages, or the runs' contexts cut to k
            ctxs = (sample_contexts(list(by_qid.values()), sweep.sampling or ContextSamplingConfig(), k=k)
                    if mode == "resample" else truncate_contexts(runs, k, by_qid, threshold))
            graded = run_contexts(by_qid, ctxs, scorer, cache, llm_name=llm, rule=spec.rule,
                                  relevance_threshold=threshold, progress=progress)
            source, width = "llm", k
        else:
            graded = [r for r in runs if len(r.pids) >= k]
            source, width = "full_context", max((len(r.pids) for r in graded), default=k)
        if not graded:
            continue
        table = build_context_table(by_qid, graded, llm, k=width, relevance_threshold=threshold).truncate(k)
        core = _core(table, by_qid, split_of, full_only)
        for r in summarise(core.correlations, _select(core.groups, split_of, spec.report_split),
                           n_bootstrap=spec.n_bootstrap, seed=spec.seed):
            rows.append({"k": k, "mode": mode, "outcome_source": source, "metric": r["metric"],
                         **{key: r[key] for key in ("spearman", "spearman_lo", "spearman_hi", "kendall")},
                         "n": r["spearman_n"], "n_na": r["spearman_na"]})
    return rows


def plot_k_sweep(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike, *, metrics: Sequence[str] = SWEEP_METRICS,
                 title: str) -> Path:
    ks = sorted({r["k"] for r in rows})
    series = {}
    for name in metrics:
        by_k = {r["k"]: r for r in rows if r["metric"] == name}
        if by_k:
            series[row_label(name)] = {key: [by_k.get(k, {}).get(src, np.nan) for k in ks]
                                       for key, src in (("y", "spearman"), ("lo", "spearman_lo"), ("hi", "spearman_hi"))}
    return plot_lines(ks, series, path, xlabel="k (passages per context)", ylabel="mean per-query Spearman",
                      title=title, xticks=ks)


def run_correlation_study(records: Sequence[QueryRecord], runs: Sequence, *, llm, k: int = 5,
                          out_dir: str | os.PathLike, spec: StudySpec | None = None, sweep: SweepSpec | None = None,
                          scorer=None, cache=None, logger=None, title: str | None = None,
                          progress: bool = True) -> CorrelationReport:
    """Run the correlation study (:class:`StudySpec`; default the paper's) and write its tables and figures to
    ``out_dir``.

    ``records`` carry single-passage annotations of ``llm`` (the annotation name, or a scorer: then it also
    answers the k sweep); ``runs``: end-to-end ``ContextRun`` s of at most ``k`` passages (ungraded ones are
    graded with ``spec.rule``). ``sweep``: the context sizes of the sensitivity sweep (:func:`k_sweep_rows`, on
    the :data:`SWEEP_METRICS` of ``spec.metrics``; never implicit: resampling asks the LLM for fresh contexts)."""
    spec, sweep = spec or StudySpec(), sweep or SweepSpec()
    llm_name = annotation_name(llm)
    scorer = llm if scorer is None and not isinstance(llm, str) else scorer  # the LLM answers the k sweep
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    by_qid = {r.qid: r for r in records}
    graded = _graded_runs(by_qid, runs, k=k, rule=spec.rule, relevance_threshold=spec.relevance_threshold)
    split_of, split_note = query_splits(by_qid, spec.seed)
    table = build_context_table(by_qid, graded, llm_name, k=k, relevance_threshold=spec.relevance_threshold)
    if not any(split_of[q] in spec.fit_splits for q in table.qids.tolist()):
        raise ValueError(f"no query with contexts in the fit splits {spec.fit_splits}: cannot fit UDCG_theta / gamma")
    core = _core(table, by_qid, split_of, spec)
    sel_report = _select(core.groups, split_of, spec.report_split)
    if not sel_report.any():
        raise ValueError(f"no query with contexts in the report split {spec.report_split!r}")
    summary = _summaries(core, sel_report, na_policy=spec.na_policy, n_bootstrap=spec.n_bootstrap, seed=spec.seed)
    per_query = _per_query_rows(table, core, split_of)
    swept = replace(spec, metrics=[m for m in spec.metrics if m in SWEEP_METRICS])
    rows = k_sweep_rows(by_qid, graded, llm=llm_name, sweep=sweep, spec=swept, split_of=split_of, scorer=scorer,
                        cache=cache, progress=progress) if sweep.k_values else []
    meta = _study_meta(table, graded, core, split_of, per_query, sel_report, fit_splits=spec.fit_splits,
                       report_split=spec.report_split, split_note=split_note,
                       head={"llm": llm_name, "k": k, "C": spec.C, "n_bootstrap": spec.n_bootstrap,
                             "seed": spec.seed, "na_policy": spec.na_policy},
                       sweep={"k_values": list(sweep.k_values), "mode": sweep.mode,
                              "outcome_source": rows[0]["outcome_source"] if rows else None})
    paths = _write_tables_and_figures(out, summary, per_query, core, rows, meta, title=title)
    md = _markdown(summary, meta, core, rows, paths, title=title)
    paths.update(_write_summary(out, md, summary, meta, core, rows))
    result = _correlation_report(summary, per_query, rows, core, md, paths, meta)
    if logger is not None:
        result.log_to(logger)
    return result


def _graded_runs(by_qid: Mapping[str, QueryRecord], runs: Sequence, *, k: int, rule: str,
                 relevance_threshold: int) -> list:
    """``runs`` graded with ``rule`` (ungraded ones); contexts of more than ``k`` passages are an error."""
    graded = grade_runs(by_qid, runs, rule=rule, relevance_threshold=relevance_threshold)
    too_long = [r for r in graded if len(r.pids) > k]
    if too_long:
        raise ValueError(f"{len(too_long)} contexts have more than k={k} passages (e.g. {too_long[0].qid!r}); "
                         "pass the right k or truncate them (fit.sampling.truncate_contexts)")
    return graded


def _summaries(core: _Core, sel_report: np.ndarray, *, na_policy: str, n_bootstrap: int,
               seed: int) -> dict[str, list[dict[str, Any]]]:
    """``report`` and ``all`` queries, then the robustness view with the other NA policy (``report_<other>``,
    ``all_<other>``; NA -> 0 puts every metric on the same queries)."""
    other = "zero" if na_policy == "na" else "na"
    return {f"{key}{suffix}": summarise(core.correlations, sel, n_bootstrap=n_bootstrap, seed=seed, na_policy=policy)
            for suffix, policy in (("", na_policy), (f"_{other}", other))
            for key, sel in (("report", sel_report), ("all", np.ones(len(core.groups), bool)))}


def _per_query_rows(table: ContextTable, core: _Core, split_of: Mapping[str, str]) -> list[dict[str, Any]]:
    """One row per query: its split, context and outcome counts, and every metric's Spearman / Kendall."""
    outcome_constant = next(iter(core.correlations.values())).outcome_constant
    per_query = []
    for g, q in enumerate(core.groups.tolist()):
        rows_q = table.outcome[table.qids == q]
        per_query.append({"qid": q, "split": split_of[q], "n_contexts": int(len(rows_q)),
                          **{f"n_{o}": int((rows_q == outcome_score(o)).sum()) for o in OUTCOMES},
                          "outcome_constant": bool(outcome_constant[g]),
                          **{f"{name}|{m}": float(getattr(qc, m)[g]) for name, qc in core.correlations.items()
                             for m in ("spearman", "kendall")}})
    return per_query


def _study_meta(table: ContextTable, graded, core: _Core, split_of: Mapping[str, str], per_query, sel_report, *,
                fit_splits, report_split, split_note, head: dict[str, Any], sweep: dict[str, Any]) -> dict[str, Any]:
    """The study's settings and counts (``summary.json``'s ``meta``, the report's header): ``head`` (llm, k, C,
    n_bootstrap, seed, na_policy) first, ``sweep`` (k values, mode, outcome source) last."""
    groups = core.groups.tolist()
    report_label = report_split if report_split not in (None, "all") else "all"
    overlap = set(fit_splits) & ({report_split} if report_label != "all" else set(split_of.values()))
    n_q = {s: sum(1 for q in groups if split_of[q] == s) for s in sorted(set(split_of[q] for q in groups))}
    return {
        **head,
        "fit_splits": list(fit_splits), "report_split": report_label, "queries_by_split": n_q,
        "n_fit_queries": sum(1 for q in groups if split_of[q] in fit_splits),
        "n_report_queries": int(sel_report.sum()), "n_queries": len(groups),
        "n_contexts": len(table), "outcomes": run_summary(graded), "other_na_policy": "zero" if head["na_policy"] == "na" else "na",
        "queries_outcome_constant": int(sum(r["outcome_constant"] for r in per_query)),
        "gamma_calibrated": core.gamma.gamma if core.gamma else None, "split_note": split_note,
        "fit_report_overlap": sorted(overlap),
        "sweep": sweep,
    }


def _write_tables_and_figures(out: Path, summary, per_query, core: _Core, sweep, meta, *,
                              title: str | None) -> dict[str, Path]:
    """The summary tables (markdown + CSV, both NA policies), per-query CSV, weights, gamma curve, bar chart and
    k-sweep figure; returns their paths by name."""
    paths: dict[str, Path] = {}
    report_label, other, k = meta["report_split"], meta["other_na_policy"], meta["k"]
    for key, label in (("report", report_label), ("all", "all"), (f"report_{other}", f"{report_label}_na_{other}"),
                       (f"all_{other}", f"all_na_{other}")):
        add_table(paths, f"table_{label}", out / f"correlation_{label}", _rendered(summary[key]), _MD_COLUMNS,
                  title=f"Metric vs end-to-end outcome correlation ({label} queries)", csv_columns=_CSV_COLUMNS)
    paths["per_query_csv"] = write_csv(out / "per_query.csv", per_query)
    if core.theta:
        paths["weights_json"] = save_weights(out / f"udcg_theta_k{k}.json", list(core.theta.values()))
        paths["weights_png"] = plot_weights(list(core.theta.values()), out / f"udcg_theta_k{k}.png",
                                            title=f"UDCG_theta weights, k={k} (fit: {'+'.join(meta['fit_splits'])}, "
                                                  f"{meta['n_fit_queries']} queries)")
    if core.gamma is not None:
        paths["gamma_csv"] = write_csv(out / "gamma_calibration.csv", core.gamma.rows())
        paths["gamma_png"] = plot_gamma_curve(core.gamma, out / "gamma_calibration.png")
    rep = summary["report"]
    where = f"{report_label} split: {meta['n_report_queries']} queries, LLM {meta['llm']}"
    paths["bars_png"] = plot_bars([row_label(r["metric"]) for r in rep], [r["spearman"] for r in rep],
                                  out / "correlation_bars.png", lo=[r["spearman_lo"] for r in rep],
                                  hi=[r["spearman_hi"] for r in rep], ylabel="mean per-query Spearman (95% CI)",
                                  highlight=[row_label(REFERENCE), row_label("udcg_theta")],
                                  title=f"{title or 'Metric-accuracy correlation'}\n{where}")
    if sweep:
        paths["k_sweep_csv"] = write_csv(out / "k_sweep.csv", sweep)
        paths["k_sweep_png"] = plot_k_sweep(
            sweep, out / "k_sweep.png", title=f"{title or 'Metric-accuracy correlation'} vs k ({sweep[0]['mode']}; "
                                              f"outcome: {sweep[0]['outcome_source']})\n{where}")
    return paths


def _write_summary(out: Path, md: str, summary, meta, core: _Core, sweep) -> dict[str, Path]:
    """``study.md`` and ``summary.json``, written last (atomically)."""
    paths = {"report_md": out / "study.md", "summary_json": out / "summary.json"}
    atomic_write_text(paths["report_md"], md)
    atomic_write_json(paths["summary_json"], json_safe({
        "meta": meta, "summary": summary, "gamma": core.gamma.to_dict() if core.gamma else None,
        "weights": {v: w.to_dict() for v, w in core.theta.items()}, "k_sweep": sweep}))
    return paths


def _correlation_report(summary, per_query, sweep, core: _Core, md: str, paths, meta) -> CorrelationReport:
    tables = {**{f"table_{key}": rows for key, rows in summary.items()}, "per_query": per_query,
              **({"k_sweep": sweep} if sweep else {}),
              **({"udcg_theta_weights": weights_rows(list(core.theta.values()))} if core.theta else {})}
    return CorrelationReport(name="correlation", rows=summary["report"], markdown=md, paths=paths, meta=meta,
                             tables=tables, scalars={f"spearman/{r['metric']}": r["spearman"] for r in summary["report"]},
                             per_query=per_query, summary=summary, k_sweep=sweep, weights=core.theta, gamma=core.gamma)


def _markdown(summary, meta, core: _Core, sweep, paths, *, title=None) -> str:
    o = meta["outcomes"]
    lines = [f"# {title or 'Metric vs end-to-end RAG accuracy: correlation study'}", "",
             f"LLM `{meta['llm']}`; contexts of k = {meta['k']} passages; {meta['n_queries']} queries, "
             f"{meta['n_contexts']} contexts (correct {o.get('correct', 0)}, abstained {o.get('abstained', 0)}, "
             f"wrong {o.get('wrong', 0)}).", "",
             f"- Fit split (UDCG_theta, gamma): {' + '.join(meta['fit_splits'])}, {meta['n_fit_queries']} queries.",
             f"- Report split: {meta['report_split']}, {meta['n_report_queries']} queries"
             + (f" (overlaps the fit split: {meta['fit_report_overlap']}; in-sample!)" if meta["fit_report_overlap"]
                else " (disjoint from the fit split)") + ".",
             f"- Queries per split: {meta['queries_by_split']}.",
             f"- Queries whose outcomes are all equal (NA for every metric): {meta['queries_outcome_constant']}.",
             f"- Bootstrap: {meta['n_bootstrap']} resamples of queries, seed {meta['seed']}; NA policy: {meta['na_policy']}."]
    if meta.get("split_note"):
        lines.append(f"- Note: {meta['split_note']}.")
    lines += ["", f"## Headline: {meta['report_split']} queries", "", correlation_markdown(summary["report"]),
              "## All queries", "",
              "(UDCG_theta and UDCG (gamma*) are in-sample on the fit-split queries included here.)", "",
              correlation_markdown(summary["all"])]
    other = meta["other_na_policy"]
    explain = ("a metric constant over a query whose outcomes vary counts 0 (it cannot tell the contexts apart), so "
               "every metric is averaged over the same queries" if other == "zero" else
               "queries where either side is constant are NA and left out")
    lines += ["", f"## Robustness: NA policy '{other}' ({meta['report_split']} queries)", "", f"Here {explain}.", "",
              correlation_markdown(summary[f"report_{other}"])]
    if core.gamma is not None:
        g = core.gamma
        lines += ["## gamma calibration", "", f"Calibrated gamma = {g.gamma:.4g} (mean per-query Spearman "
                  f"{g.best_score:.3f} on {g.n_queries} fit queries; paper gamma 1/3 scores "
                  f"{g.mean_spearman[np.argmin(np.abs(g.grid - DEFAULT_GAMMA))]:.3f}).", ""]
    if core.theta:
        wrows = [{"variant": w.name, "alpha": " ".join(f"{a:.3f}" for a in w.alpha),
                  "beta": " ".join(f"{b:.3f}" for b in w.beta), "C": f"{w.meta.get('C'):g}",
                  "pairs": w.meta.get("n_pairs"), "train pair acc.": fmt_float(w.meta.get("train_pairwise_accuracy"))}
                 for w in core.theta.values()]
        lines += ["## UDCG_theta weights", "", markdown_table(wrows, align="lllrrr"), ""]
    if sweep:
        lines += [f"## Sensitivity to k ({sweep[0]['mode']}; outcome from: {sweep[0]['outcome_source']})", ""]
        ks = sorted({r["k"] for r in sweep})
        spearman = {(r["metric"], r["k"]): r["spearman"] for r in sweep}
        srows = [{"metric": row_label(name), **{f"k={kk}": fmt_float(spearman.get((name, kk))) for kk in ks}}
                 for name in dict.fromkeys(r["metric"] for r in sweep)]
        lines += [markdown_table(srows), ""]
    lines += ["## Definitions", "", METRIC_NOTES, "## Files", "", *(f"- `{p.name}`" for p in paths.values())]
    return "\n".join(lines) + "\n"
