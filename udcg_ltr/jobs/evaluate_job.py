"""The body of ``evaluate.py``: one function per ``mode`` (see conf/evaluate.yaml), each returning metrics."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from udcg_ltr.annotate.annotator import annotate_records
from udcg_ltr.annotate.end_to_end import load_shared_runs, run_contexts
from udcg_ltr.data.padded import judged_pools
from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.fit.sampling import ContextSamplingConfig, sample_contexts
from udcg_ltr.jobs.common import STUDY_MODES, JobContext, has_annotations, run_job, validate_config
from udcg_ltr.jobs.systems import report_systems, report_trec, retrieval_scores
from udcg_ltr.models.evaluation import top_k_by
from udcg_ltr.studies import get_study
from udcg_ltr.sweeps import summarize_sweep
from udcg_ltr.tracking import RunLogger

log = logging.getLogger("udcg_ltr.evaluate")


class EvalContext(JobContext):
    def uses_llm(self) -> bool:
        return bool(self.cfg.end_to_end) and bool(self.cfg.dataset.get("has_answers", False)) \
            and self.llm_name is not None

    def report(self, records: list[QueryRecord], systems: dict[str, list[list[str]]], title: str, *,
               llm: str | None, chosen_k: dict[str, np.ndarray] | None = None) -> dict[str, float]:
        """:func:`report_systems` at the job's k, gamma, relevance threshold and match rule; the LLM answers
        each context when the job is end to end (:meth:`uses_llm`) and ``llm`` annotated the records."""
        return report_systems(records, systems, run_dir=self.run_dir, logger=self.logger, title=title,
                              llm=llm, k=int(self.cfg.k), gamma=float(self.cfg.gamma),
                              relevance_threshold=self.threshold, match_rule=str(self.cfg.match_rule),
                              chosen_k=chosen_k, scorer=self.scorer if self.uses_llm() and llm else None)[1]


def _rows_with_annotations(ctx: EvalContext, records: list[QueryRecord]) -> list[QueryRecord]:
    if ctx.llm_name is not None and not has_annotations(records, ctx.llm_name):
        ctx.ensure_annotations(records, answers=True)
    return records


def mode_metrics(ctx: EvalContext) -> dict[str, float]:
    """The metric table of the retriever's top-k (and a reranker's with ``reranker.path``) on ``splits``."""
    cfg, k = ctx.cfg, int(ctx.cfg.k)
    records = ctx.split(list(cfg.splits)) or ctx.records
    if ctx.llm_name is not None and cfg.dataset.get("has_answers", False):
        _rows_with_annotations(ctx, records)
    llm_name = ctx.llm_name if has_annotations(records, ctx.llm_name) else None
    systems = {f"retriever@{k}": top_k_by(records, retrieval_scores(records), k)}
    if cfg.reranker.path:
        systems[f"reranker@{k}"] = top_k_by(records, _reranker_scores(ctx, records), k)
    return ctx.report(records, systems, f"{cfg.dataset.name}: {len(records)} queries, k = {k}", llm=llm_name)


def _reranker_scores(ctx: EvalContext, records: list[QueryRecord]) -> list[np.ndarray]:
    from udcg_ltr.models.reranker import Reranker

    rc = ctx.cfg.reranker  # validate_config made sure the modes that come here have a reranker.path
    reranker = Reranker.from_pretrained(rc.path, batch_size=int(rc.batch_size), max_length=int(rc.max_length))
    return [np.asarray(s, dtype=np.float64) for s in reranker.score_records(records, progress=True)]


def mode_reranker(ctx: EvalContext) -> dict[str, float]:
    """A trained reranker's top-k against the retriever's and the utility oracle's, with the LLM end to end;
    with qrels, the full rankings' TREC table too (:func:`report_trec`). ``ties``: ``stable`` | ``trec``."""
    cfg, k = ctx.cfg, int(ctx.cfg.k)
    ties = str(cfg.get("ties") or "stable")
    splits = None if cfg.splits is None else list(cfg.splits)  # null (dl19_rerank): every query
    records = _rows_with_annotations(ctx, ctx.split(splits))
    llm = ctx.llm_name
    rankings = {"retriever": retrieval_scores(records), "reranker": _reranker_scores(ctx, records)}
    if llm is not None:
        rankings["oracle_utility"] = [np.array([p.utility(llm, ctx.threshold) for p in r.passages]) for r in records]
    systems = {f"{name}@{k}": top_k_by(records, scores, k, ties=ties) for name, scores in rankings.items()}
    title = f"reranker {cfg.reranker.path} on {cfg.dataset.name}: {len(records)} queries"
    metrics = ctx.report(records, systems, title, llm=llm)
    if judged_pools(records, ctx.threshold).from_qrels.any():
        metrics.update(report_trec(records, rankings, run_dir=ctx.run_dir, logger=ctx.logger, title=title,
                                   relevance_threshold=ctx.threshold, cutoffs=sorted({5, 10, k}), ties=ties))
    return metrics


def mode_selectors(ctx: EvalContext) -> dict[str, float]:
    """Every configured dynamic-k selector, fitted on ``selectors.fit_split`` scores, evaluated on ``splits``."""
    from udcg_ltr.select.training import fit_selector_with_prior, select_k

    cfg, k, sc = ctx.cfg, int(ctx.cfg.k), ctx.cfg.selectors
    fit_records = _rows_with_annotations(ctx, ctx.split(sc.fit_split))
    test_records = _rows_with_annotations(ctx, ctx.split(list(cfg.splits)))
    scores_of = (lambda rs: _reranker_scores(ctx, rs)) if sc.scores == "reranker" else retrieval_scores

    def prior():  # calibrated_utility learns its ranker-free prior on these rows
        rows = _rows_with_annotations(ctx, ctx.split(sc.get("prior_split", "train")))
        if not rows:
            raise ValueError(f"selectors: no annotated records in prior split {sc.get('prior_split', 'train')!r}")
        return scores_of(rows), ctx.slates(rows)

    fit_scores, test_scores = scores_of(fit_records), scores_of(test_records)
    systems = {f"{sc.scores}@{k}": top_k_by(test_records, test_scores, k)}
    chosen = {}
    for kind in sc.kinds:
        selector, _ = fit_selector_with_prior(str(kind), fit_scores, ctx.slates(fit_records), prior,
                                              gamma=float(cfg.gamma), fit_on="train",
                                              output_dir=str(ctx.run_dir / "selectors" / str(kind)))
        ks = np.minimum(select_k(selector, test_scores, ctx.slates(test_records)), int(sc.max_k))
        systems[f"{sc.scores}+{kind}"] = top_k_by(test_records, test_scores, ks)
        chosen[str(kind)] = ks
    title = (f"dynamic-k selectors on {cfg.dataset.name} ({sc.scores} scores), fitted on {sc.fit_split}, "
             f"{len(test_records)} test queries")
    return ctx.report(test_records, systems, title, llm=ctx.llm_name, chosen_k=chosen)


def mode_correlation(ctx: EvalContext) -> dict[str, float]:
    """The correlation study: per-query Spearman / Kendall between each metric and end-to-end outcomes."""
    from udcg_ltr.studies.correlation import run_correlation_study

    cfg, cc = ctx.cfg, ctx.cfg.correlation
    records = ctx.records[: int(cc.limit_queries)] if cc.limit_queries else ctx.records
    k_sweep = list(cc.k_sweep) if cc.k_sweep is not None else None
    sweep_mode = str(cc.sweep_mode)
    scorer = None
    if cfg.dataset.get("contexts_path"):  # ready-made end-to-end runs: no LLM needed
        runs = load_shared_runs(records, path=cfg.dataset.contexts_path, rule=str(cfg.match_rule))
        k = max(len(r.pids) for r in runs)
        if sweep_mode == "auto" or (sweep_mode == "resample" and not ctx.uses_llm()):
            sweep_mode = "truncate"
        if sweep_mode == "truncate":
            k_sweep = [x for x in (k_sweep or []) if x <= k]
        else:
            scorer = ctx.scorer
    else:
        k = int(cfg.k)
        sweep_mode = "resample" if sweep_mode == "auto" else sweep_mode
        ctx.ensure_annotations(records, answers=True)
        sampling = ContextSamplingConfig(n_contexts=int(cc.n_contexts), k=k, top_n=int(cc.top_n),
                                         positive_fraction=float(cc.positive_fraction), seed=int(cfg.seed))
        contexts = sample_contexts(records, sampling)
        scorer = ctx.scorer
        runs = run_contexts(records, contexts, scorer, rule=str(cfg.match_rule), relevance_threshold=ctx.threshold)
    if cc.get("answer_prob") and ctx.llm_name is not None:  # the ANSWER_PROB baseline (teacher forcing)
        in_study = {r.qid for r in runs}
        annotate_records([r for r in records if r.qid in in_study], ctx.scorer, fields=["answer_logprob"],
                         progress=True)
    study = run_correlation_study(
        records, runs, llm=ctx.llm_name, k=k, fit_splits=tuple(cc.fit_splits), report_split=cc.report_split,
        C=cc.C if cc.C == "cv" else float(cc.C), n_bootstrap=int(cc.n_bootstrap), seed=int(cfg.seed),
        out_dir=ctx.run_dir / "correlation", k_sweep=k_sweep, sweep_mode=sweep_mode, scorer=scorer,
        rule=str(cfg.match_rule), relevance_threshold=ctx.threshold, na_policy=str(cc.na_policy),
        logger=None, title=f"{cfg.dataset.name}: metric-accuracy correlation")
    if getattr(ctx.logger, "run", None) is not None:  # a W&B run
        study.log_to(ctx.logger.run)
    print("\n" + study.markdown)
    print(study.bench_line())
    return {f"correlation/spearman/{row['metric']}": row["spearman"] for row in study.rows}


def mode_study(ctx: EvalContext, name: str) -> dict[str, float]:
    """One of the paper's analyses (:mod:`udcg_ltr.studies`) with the parameters under ``studies.<name>``;
    ``context_size`` on a dataset with ready-made runs (``contexts_path``) truncates them, asking no LLM."""
    cfg = ctx.cfg
    run, _ = get_study(name)
    params = OmegaConf.to_container(cfg.studies[name], resolve=True) if cfg.get("studies") and name in cfg.studies else {}
    params = {"seed": int(cfg.seed), "rule": str(cfg.match_rule), "relevance_threshold": ctx.threshold,
              "dataset": str(cfg.dataset.name), **params}  # the data set is named in the study's plot titles
    if ctx.llm_name is None:
        raise ValueError(f"mode={name} needs an LLM (llm=demo, llm=smollm2, ...)")
    source = (load_shared_runs(ctx.records, path=cfg.dataset.contexts_path, rule=str(cfg.match_rule))
              if name == "context_size" and cfg.dataset.get("contexts_path") else ctx.scorer)
    report = run(ctx.records, source, llm=ctx.llm_name, out_dir=ctx.run_dir / name, logger=ctx.logger,
                 cache=False, **params)
    print("\n" + report.markdown)
    return {f"{name}/{key}": value for key, value in report.scalars.items()}


def mode_sweep_summary(ctx: EvalContext) -> dict[str, float]:
    paths = summarize_sweep(ctx.cfg.sweep_dir)
    print(Path(paths["markdown"]).read_text(encoding="utf-8"))
    if "plot" in paths:
        ctx.logger.log_image("sweep_summary", paths["plot"])
    return {}


MODES: dict[str, Callable[[EvalContext], dict[str, float]]] = {
    "metrics": mode_metrics, "reranker": mode_reranker, "selectors": mode_selectors,
    "correlation": mode_correlation, "sweep_summary": mode_sweep_summary,
    **{mode: partial(mode_study, name=study) for mode, study in STUDY_MODES.items()}}


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    mode = str(cfg.mode)

    def body(run_dir: Path, logger: RunLogger) -> dict[str, float]:
        t0 = time.perf_counter()
        metrics = {k: float(v) for k, v in MODES[mode](EvalContext(cfg, run_dir, logger)).items()
                   if isinstance(v, (int, float, np.floating)) and not isinstance(v, bool)}
        metrics["time/total_s"] = time.perf_counter() - t0
        logger.log_metrics(metrics)
        return metrics

    check = partial(validate_config, cfg, mode=mode, known_modes=list(MODES))
    return run_job(cfg, job_type=f"evaluate/{mode}", body=body, check=check)
