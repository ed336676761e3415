"""The body of ``evaluate.py``: one function per ``mode`` (see conf/evaluate.yaml), each returning metrics."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from functools import cached_property, partial
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

from udcg_ltr.annotate.annotator import annotate_records
from udcg_ltr.annotate.end_to_end import load_shared_runs, run_contexts
from udcg_ltr.data.padded import judged_pools
from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.data.scores import PassageScores
from udcg_ltr.fit.sampling import ContextSamplingConfig, sample_contexts
from udcg_ltr.io import atomic_write_json, json_safe, read_json_dict, sha256_file
from udcg_ltr.jobs.common import JobContext, has_annotations, run_job, subsample
from udcg_ltr.jobs.settings import STUDY_MODES, EvaluateSettings
from udcg_ltr.jobs.systems import ReportTarget, report_systems, report_trec, retrieval_scores, utility_scores
from udcg_ltr.models.evaluation import top_k_by
from udcg_ltr.models.fusion import fuse_scores
from udcg_ltr.studies import get_study
from udcg_ltr.sweeps import summarize_sweep
from udcg_ltr.tracking import RunLogger

log = logging.getLogger("udcg_ltr.evaluate")


class EvalContext(JobContext):
    settings: EvaluateSettings

    def uses_llm(self) -> bool:
        return self.settings.end_to_end and self.settings.dataset.has_answers and self.llm_name is not None

    @cached_property
    def reranker(self):
        """The saved reranker of ``reranker.path`` (the settings made sure the modes reading it set it)."""
        from udcg_ltr.models.reranker import Reranker

        rc = self.settings.reranker
        return Reranker.from_pretrained(rc.path, batch_size=rc.batch_size, max_length=rc.max_length)

    def reranker_identity(self) -> dict[str, Any]:
        """What the reranker's own scores depend on: its weights' sha256 and the input length; a scores cache
        written by another model (say one retrained in the same folder) is not reused."""
        weights = sorted(Path(self.settings.reranker.path).glob("*.safetensors"))
        return {"weights_sha256": [sha256_file(w) for w in weights], "max_length": self.reranker.max_length}

    def report(self, records: list[QueryRecord], systems: dict[str, list[list[str]]], title: str, *,
               llm: str | None, chosen_k: dict[str, np.ndarray] | None = None) -> dict[str, float]:
        """:func:`report_systems` at the job's k, gamma, relevance threshold and match rule; the LLM answers
        each context when the job is end to end (:meth:`uses_llm`) and ``llm`` annotated the records."""
        return report_systems(records, systems, target=ReportTarget(self.run_dir, self.logger, title),
                              llm=llm, k=self.settings.k, gamma=self.settings.gamma,
                              relevance_threshold=self.threshold, match_rule=self.settings.match_rule,
                              chosen_k=chosen_k, scorer=self.scorer if self.uses_llm() and llm else None)[1]


def _rows_with_annotations(ctx: EvalContext, records: list[QueryRecord]) -> list[QueryRecord]:
    if ctx.llm_name is not None and not has_annotations(records, ctx.llm_name):
        ctx.ensure_annotations(records, answers=True)
    return records


def mode_metrics(ctx: EvalContext) -> dict[str, float]:
    """The metric table of the retriever's top-k (and a reranker's with ``reranker.path``) on ``splits``."""
    s, k = ctx.settings, ctx.settings.k
    records = ctx.split(s.splits) or ctx.records
    if ctx.llm_name is not None and s.dataset.has_answers:
        _rows_with_annotations(ctx, records)
    llm_name = ctx.llm_name if has_annotations(records, ctx.llm_name) else None
    systems = {f"retriever@{k}": top_k_by(records, retrieval_scores(records), k)}
    if s.reranker.path:
        systems[f"reranker@{k}"] = top_k_by(records, _reranker_scores(ctx, records), k)
    return ctx.report(records, systems, f"{s.dataset.name}: {len(records)} queries, k = {k}", llm=llm_name)


def _reranker_scores(ctx: EvalContext, records: list[QueryRecord], cache: Path | None = None) -> PassageScores:
    """``reranker.path``'s scores of ``records``, fused with the retriever's by its saved weight; with ``cache`` (a JSON
    of the model's own scores by question id, stamped with :meth:`EvalContext.reranker_identity`) only the questions
    not in it are scored, then added to it. A cache of another model, or of another format, is started afresh."""
    identity = ctx.reranker_identity() if cache is not None else None
    doc = (read_json_dict(cache) if cache is not None else None) or {}
    stored = PassageScores()
    if cache is not None and doc.get("scorer") == identity:
        try:
            stored = PassageScores.from_json_dict(doc.get("scores"))
        except ValueError as err:  # another format, or a damaged file: every question is scored again
            log.warning("reranker scores cache %s not reused: %s", cache, err)
    missing = stored.missing(records)  # a question whose pool changed size is scored again
    if missing:
        stored = stored.merge(ctx.reranker.score_records(missing, progress=True, fuse=False))
        if cache is not None:
            atomic_write_json(cache, {"scorer": identity, "scores": stored.to_json_dict()}, indent=None)
    return fuse_scores(records, stored, ctx.reranker.retriever_fusion)


def mode_reranker(ctx: EvalContext) -> dict[str, float]:
    """A trained reranker's top-k against the retriever's and the utility oracle's, with the LLM end to end;
    with qrels, the full rankings' TREC table too (:func:`report_trec`). ``ties``: ``stable`` | ``trec``."""
    s, k, ties = ctx.settings, ctx.settings.k, ctx.settings.ties
    # splits null (dl19_rerank): every query; max_questions: a seeded draw (end to end, a prompt per context)
    records = _rows_with_annotations(ctx, subsample(ctx.split(s.splits), s.reranker.max_questions, seed=s.seed))
    llm = ctx.llm_name
    cache = Path(s.reranker.scores_cache) if s.reranker.scores_cache else None
    rankings = {"retriever": retrieval_scores(records), "reranker": _reranker_scores(ctx, records, cache)}
    if llm is not None:
        rankings["oracle_utility"] = utility_scores(records, llm, ctx.threshold)
    systems = {f"{name}@{k}": top_k_by(records, scores, k, ties=ties) for name, scores in rankings.items()}
    title = f"reranker {s.reranker.path} on {s.dataset.name}: {len(records)} queries"
    metrics = ctx.report(records, systems, title, llm=llm)
    if judged_pools(records, ctx.threshold).from_qrels.any():
        metrics.update(report_trec(records, rankings, run_dir=ctx.run_dir, logger=ctx.logger, title=title,
                                   relevance_threshold=ctx.threshold, cutoffs=sorted({5, 10, k}), ties=ties))
    return metrics


def _retriever_order(records: list[QueryRecord]) -> PassageScores:
    """The retriever's scores when every passage of ``records`` has a finite one, else minus its ranks (0 where a
    passage has none): the selectors' order of one split."""
    scored = all(p.score is not None and np.isfinite(p.score) for r in records for p in r.passages)
    return PassageScores.of(records, [[p.score if scored else -(p.rank or 0) for p in r.passages] for r in records])


def mode_selectors(ctx: EvalContext) -> dict[str, float]:
    """The dynamic-k study (conf/mode/selectors.yaml): each selector of ``selectors.kinds`` keeps a top-k prefix of the
    ``selectors.scores`` order per question, judged by the UDCG (Eq. 4) of the kept set on the test split. Rule kinds
    are fitted on train + val (fixed_k as ``best_fixed``); learned kinds are the ``selectors.grid`` candidates trained
    on train, epoch and configuration chosen on val (:func:`~udcg_ltr.select.training.fit_learned`: each kind's best,
    ``learned``, ``learned_no_llm``; with ``selectors.refit``, then refitted on train + val); then the oracle. Writes
    per_query_test.csv, selectors_test.csv (with each selector's val UDCG), learned_grid.csv, k_hist_test.png,
    selectors.json and the selectors (selectors/<name>) to the run folder."""
    from udcg_ltr.select import OracleK, evaluate_selectors, fit_selector, format_rows_markdown, save_selector
    from udcg_ltr.select.training import LEARNED_KINDS, fit_learned, learned_candidates

    settings, sc, gamma = ctx.settings, ctx.settings.selectors, ctx.settings.gamma
    split = {"train": ctx.split("train"), "val": ctx.split("val"), "test": ctx.split(settings.splits)}
    exclude = json.loads(Path(sc.exclude_questions).read_text("utf-8")) if sc.exclude_questions else {}
    excluded = {}
    for s in ("train", "val"):
        drop = set(exclude.get(s, ()))
        kept = [r for r in split[s] if r.qid not in drop]
        excluded[s] = len(split[s]) - len(kept)
        split[s] = subsample(kept, sc.max_questions[s], seed=settings.seed)
    counts = {s: len(v) for s, v in split.items()}
    if not all(counts.values()):
        # A reranker trained (or validated) on a whole split leaves that split empty: say which way out.
        hint = (f" once the reranker's own questions are left out ({excluded}, selectors.exclude_questions): train "
                "it on part of each split (model.cross_encoder.train_questions / val_questions)"
                if any(excluded.values()) else "")
        raise ValueError(f"selectors: every split needs questions, got {counts}{hint}")
    log.info("questions: %s (left out: %s)", counts, excluded)
    slates = {s: ctx.slates(_rows_with_annotations(ctx, rs)) for s, rs in split.items()}
    # reranker order: its own scores kept per question in the run folder, so a resumed job does not rescore
    data = {s: (_reranker_scores(ctx, rs, ctx.run_dir / "reranker_scores.json") if sc.scores == "reranker"
                else _retriever_order(rs), slates[s]) for s, rs in split.items()}
    kinds, knobs = sc.kinds, sc.knobs
    selectors, rules = {}, {}
    for kind in kinds:
        if kind not in (*LEARNED_KINDS, "oracle"):
            name = "best_fixed" if kind == "fixed_k" else kind
            selectors[name], metrics = fit_selector(kind, *data["train"], *data["val"], gamma=gamma,
                                                    fit_on="train+val", **(knobs.get(kind) or {}))
            rules[name] = {"config": selectors[name].get_config(), **metrics}
    t0 = time.perf_counter()
    extra = ["retrieval_score"] if sc.scores == "reranker" else []  # a reranker's order: the retriever's too
    candidates = [] if sc.grid == "none" else [
        c for c in learned_candidates(extra, sc.grid == "quick", sc.probes, **sc.budget) if c[0] in kinds]
    grid, choice = [], {}
    if candidates:
        learned, grid, choice = fit_learned(candidates, data["train"], data["val"], gamma=gamma,
                                            seed=settings.seed, refit=sc.refit)
        selectors.update(learned)
    learned_s = time.perf_counter() - t0
    if "oracle" in kinds:
        selectors["oracle"] = OracleK()
    val_rows = {r["selector"]: r for r in evaluate_selectors(selectors, *data["val"], gamma=gamma, split="val")}
    per_query: dict[str, np.ndarray] = {}
    png = ctx.run_dir / "k_hist_test.png"
    rows = evaluate_selectors(selectors, *data["test"], gamma=gamma, split="test", per_query=per_query,
                              plot_path=png, title=f"chosen k on test, {sc.scores} order")
    for row in rows:  # a selector that learned from val (calibrated, refitted) competes with its held-out val UDCG
        sel = selectors[row["selector"]]
        row["val_udcg"] = (sel.crossfit_metrics["val/udcg"] if getattr(sel, "fits_on_val", False)
                           else val_rows[row["selector"]]["udcg"])
    for name, sel in selectors.items():  # reloadable with udcg_ltr.select.load_selector
        save_selector(sel, ctx.run_dir / "selectors" / name)
    atomic_write_json(ctx.run_dir / "selectors.json", json_safe({
        "scores": sc.scores, "questions": counts, "excluded": excluded,
        "retriever_fusion": ctx.reranker.retriever_fusion if sc.scores == "reranker" else None,
        "grid": sc.grid, "n_candidates": len(candidates), "refit": sc.refit, "choice": choice, "rules": rules,
        "learned_seconds": learned_s}))
    ctx.logger.log_results(tables={
        "selectors_test": rows, "learned_grid": [{**r, "hparams": json.dumps(r["hparams"])} for r in grid],
        "per_query_test": [{"qid": r.qid, **{name: float(v[i]) for name, v in per_query.items()}}
                           for i, r in enumerate(split["test"])]}, images={"k_hist_test": png})
    print("\n" + format_rows_markdown(rows, ["selector", "val_udcg", "udcg", "udcg_se", "mean_k", "k0_rate", "k_hist"]))
    return {f"test/{r['selector']}/{key}": r[key] for r in rows for key in ("udcg", "mean_k", "k0_rate")}


def mode_correlation(ctx: EvalContext) -> dict[str, float]:
    """The correlation study: per-query Spearman / Kendall between each metric and end-to-end outcomes."""
    from udcg_ltr.studies.correlation import StudySpec, SweepSpec, run_correlation_study

    s, cc = ctx.settings, ctx.settings.correlation
    records = ctx.records[: cc.limit_queries] if cc.limit_queries else ctx.records
    k_sweep, sweep_mode = cc.k_sweep, cc.sweep_mode
    scorer = None
    if s.dataset.contexts_path:  # ready-made end-to-end runs: no LLM needed
        runs = load_shared_runs(records, path=s.dataset.contexts_path, rule=s.match_rule)
        k = max(len(r.pids) for r in runs)
        if sweep_mode == "auto" or (sweep_mode == "resample" and not ctx.uses_llm()):
            sweep_mode = "truncate"
        if sweep_mode == "truncate":
            k_sweep = [x for x in (k_sweep or []) if x <= k]
        else:
            scorer = ctx.scorer
    else:
        k = s.k
        sweep_mode = "resample" if sweep_mode == "auto" else sweep_mode
        ctx.ensure_annotations(records, answers=True)
        sampling = ContextSamplingConfig(n_contexts=cc.n_contexts, k=k, top_n=cc.top_n,
                                         positive_fraction=cc.positive_fraction, seed=s.seed)
        contexts = sample_contexts(records, sampling)
        scorer = ctx.scorer
        runs = run_contexts(records, contexts, scorer, rule=s.match_rule, relevance_threshold=ctx.threshold)
    if cc.answer_prob and ctx.llm_name is not None:  # the ANSWER_PROB baseline (teacher forcing)
        in_study = {r.qid for r in runs}
        annotate_records([r for r in records if r.qid in in_study], ctx.scorer, fields=["answer_logprob"],
                         progress=True)
    study = run_correlation_study(
        records, runs, llm=ctx.llm_name, k=k, spec=StudySpec(
            fit_splits=tuple(cc.fit_splits), report_split=cc.report_split, C=cc.C, n_bootstrap=cc.n_bootstrap,
            seed=s.seed, rule=s.match_rule, relevance_threshold=ctx.threshold, na_policy=cc.na_policy),
        out_dir=ctx.run_dir / "correlation", sweep=SweepSpec(k_sweep or (), sweep_mode), scorer=scorer,
        logger=None, title=f"{s.dataset.name}: metric-accuracy correlation")
    if getattr(ctx.logger, "run", None) is not None:  # a W&B run
        study.log_to(ctx.logger.run)
    print("\n" + study.markdown)
    print(study.bench_line())
    return {f"correlation/spearman/{row['metric']}": row["spearman"] for row in study.rows}


def mode_study(ctx: EvalContext, name: str) -> dict[str, float]:
    """One of the paper's analyses (:mod:`udcg_ltr.studies`) with the parameters under ``studies.<name>``;
    ``context_size`` on a dataset with ready-made runs (``contexts_path``) truncates them, asking no LLM."""
    s = ctx.settings
    run, _ = get_study(name)
    # the data set is named in the study's plot titles
    params = {"dataset": s.dataset.name, **s.study_params(name)}
    if ctx.llm_name is None:
        raise ValueError(f"mode={name} needs an LLM (llm=demo, llm=smollm2, ...)")
    source = (load_shared_runs(ctx.records, path=s.dataset.contexts_path, rule=s.match_rule)
              if name == "context_size" and s.dataset.contexts_path else ctx.scorer)
    report = run(ctx.records, source, llm=ctx.llm_name, out_dir=ctx.run_dir / name, logger=ctx.logger,
                 cache=False, **params)
    print("\n" + report.markdown)
    return {f"{name}/{key}": value for key, value in report.scalars.items()}


def mode_sweep_summary(ctx: EvalContext) -> dict[str, float]:
    paths = summarize_sweep(ctx.settings.sweep_dir)
    print(paths["md"].read_text(encoding="utf-8"))
    if "plot" in paths:
        ctx.logger.log_image("sweep_summary", paths["plot"])
    return {}


MODES: dict[str, Callable[[EvalContext], dict[str, float]]] = {
    "metrics": mode_metrics, "reranker": mode_reranker, "selectors": mode_selectors,
    "correlation": mode_correlation, "sweep_summary": mode_sweep_summary,
    **{mode: partial(mode_study, name=study) for mode, study in STUDY_MODES.items()}}


#: Modes that read the top-level ``splits``.
SPLIT_MODES = ("metrics", "reranker", "selectors")


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """Run ``mode`` and return its metrics (skipping a job that already finished); the settings are built, and so
    checked, before the mode starts."""

    def body(settings: EvaluateSettings, run_dir: Path, logger: RunLogger) -> dict[str, float]:
        t0 = time.perf_counter()
        ctx = EvalContext(cfg, settings, run_dir, logger)
        if settings.mode in SPLIT_MODES:  # needs the records: the first thing the mode does, before any of its work
            ctx.check_splits("splits", settings.splits)
        metrics = {k: float(v) for k, v in MODES[settings.mode](ctx).items()
                   if isinstance(v, (int, float, np.floating)) and not isinstance(v, bool)}
        metrics["time/total_s"] = time.perf_counter() - t0
        logger.log_metrics(metrics)
        return metrics

    return run_job(cfg, EvaluateSettings, job_type=f"evaluate/{cfg.mode}", body=body)
