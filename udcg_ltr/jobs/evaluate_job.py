"""The body of ``evaluate.py``: one function per ``mode`` (see conf/evaluate.yaml), each returning metrics."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from udcg_ltr.annotate.annotator import annotate_records
from udcg_ltr.annotate.end_to_end import load_shared_runs, run_contexts
from udcg_ltr.data.lexical import records_idf
from udcg_ltr.data.padded import judged_pools, pad_records
from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.fit.sampling import ContextSamplingConfig, sample_contexts
from udcg_ltr.jobs.common import (
    load_records,
    run_job,
    select_split,
    validate_config,
)
from udcg_ltr.jobs.llm import LLMAccess, has_annotations
from udcg_ltr.jobs.systems import report_systems, report_trec, retrieval_scores
from udcg_ltr.models.evaluation import top_k_by
from udcg_ltr.studies import get_study
from udcg_ltr.sweeps import summarize_sweep
from udcg_ltr.tracking import RunLogger

log = logging.getLogger("udcg_ltr.evaluate")


class EvalContext:
    """What every mode needs: config, run folder, logger, records (loaded on demand) and the LLM."""

    def __init__(self, cfg: DictConfig, run_dir: Path, logger: RunLogger):
        self.cfg, self.run_dir, self.logger = cfg, run_dir, logger
        self.llm = LLMAccess(cfg.get("llm"), cfg.paths.get("annotation_cache_dir"))
        self._records: list[QueryRecord] | None = None

    @property
    def records(self) -> list[QueryRecord]:
        if self._records is None:
            self._records = load_records(self.cfg)
            log.info("dataset %s: %d queries", self.cfg.dataset.name, len(self._records))
        return self._records

    @property
    def threshold(self) -> int:
        return int(self.cfg.dataset.get("relevance_threshold", 1))

    def uses_llm(self) -> bool:
        return bool(self.cfg.end_to_end) and bool(self.cfg.dataset.get("has_answers", False)) and self.llm.name is not None

    def wandb_run(self):
        return getattr(self.logger, "run", None)


def _rows_with_annotations(ctx: EvalContext, records: list[QueryRecord]) -> list[QueryRecord]:
    if ctx.llm.name is not None and not has_annotations(records, ctx.llm.name):
        ctx.llm.ensure_annotations(records, answers=True)
    return records


# ---- modes -----------------------------------------------------------------------------------------
def mode_metrics(ctx: EvalContext) -> dict[str, float]:
    """The metric table of the retriever's top-k (and a reranker's with ``reranker.path``) on ``splits``."""
    cfg, k = ctx.cfg, int(ctx.cfg.k)
    records = select_split(ctx.records, list(cfg.splits)) or ctx.records
    if ctx.llm.name is not None and cfg.dataset.get("has_answers", False):
        _rows_with_annotations(ctx, records)
    llm_name = ctx.llm.name if has_annotations(records, ctx.llm.name) else None
    systems = {f"retriever@{k}": top_k_by(records, retrieval_scores(records), k)}
    if cfg.reranker.path:
        systems[f"reranker@{k}"] = top_k_by(records, _reranker_scores(ctx, records), k)
    _, metrics = report_systems(records, systems, run_dir=ctx.run_dir, logger=ctx.logger, llm=llm_name, k=k,
                                gamma=float(cfg.gamma), relevance_threshold=ctx.threshold,
                                match_rule=str(cfg.match_rule),
                                scorer=ctx.llm.scorer if (ctx.uses_llm() and llm_name) else None,
                                title=f"{cfg.dataset.name}: {len(records)} queries, k = {k}")
    return metrics


def _reranker_scores(ctx: EvalContext, records: list[QueryRecord]) -> list[np.ndarray]:
    from udcg_ltr.models.reranker import Reranker

    rc = ctx.cfg.reranker
    if not rc.path:
        raise ValueError("this mode needs a trained reranker: reranker.path=<folder saved by train.py>")
    reranker = Reranker.from_pretrained(rc.path, batch_size=int(rc.batch_size), max_length=int(rc.max_length))
    return [np.asarray(s, dtype=np.float64) for s in reranker.score_records(records, progress=True)]


def mode_reranker(ctx: EvalContext) -> dict[str, float]:
    """A trained reranker's top-k against the retriever's and the utility oracle's, with the LLM end to end.

    With qrels (TREC data) the full rankings also get the TREC table (:func:`report_trec`: trec_eval's
    measures, unjudged queries dropped and counted). ``ties`` (``stable`` | ``trec``) breaks equal scores.
    """
    cfg, k = ctx.cfg, int(ctx.cfg.k)
    ties = str(cfg.get("ties") or "stable")
    splits = None if cfg.splits is None else list(cfg.splits)  # null (dl19_rerank): every query
    records = _rows_with_annotations(ctx, select_split(ctx.records, splits))
    llm = ctx.llm.name
    rankings = {"retriever": retrieval_scores(records), "reranker": _reranker_scores(ctx, records)}
    if llm is not None:
        rankings["oracle_utility"] = [np.array([p.utility(llm, ctx.threshold) for p in r.passages]) for r in records]
    systems = {f"{name}@{k}": top_k_by(records, scores, k, ties=ties) for name, scores in rankings.items()}
    title = f"reranker {cfg.reranker.path} on {cfg.dataset.name}: {len(records)} queries"
    _, metrics = report_systems(records, systems, run_dir=ctx.run_dir, logger=ctx.logger, llm=llm, k=k,
                                gamma=float(cfg.gamma), relevance_threshold=ctx.threshold,
                                match_rule=str(cfg.match_rule), scorer=ctx.llm.scorer if ctx.uses_llm() else None,
                                title=title)
    if judged_pools(records, ctx.threshold).from_qrels.any():
        metrics.update(report_trec(records, rankings, run_dir=ctx.run_dir, logger=ctx.logger, title=title,
                                   relevance_threshold=ctx.threshold, cutoffs=sorted({5, 10, k}), ties=ties))
    return metrics


def mode_selectors(ctx: EvalContext) -> dict[str, float]:
    """Every configured dynamic-k selector, fitted on ``selectors.fit_split`` scores, evaluated on ``splits``."""
    from udcg_ltr.select.training import fit_selector_with_prior, select_k

    cfg, k = ctx.cfg, int(ctx.cfg.k)
    sc = cfg.selectors
    fit_records = _rows_with_annotations(ctx, select_split(ctx.records, sc.fit_split))
    test_records = _rows_with_annotations(ctx, select_split(ctx.records, list(cfg.splits)))
    width = max(len(r.passages) for r in ctx.records)
    scores_of = (lambda rs: _reranker_scores(ctx, rs)) if sc.scores == "reranker" else retrieval_scores
    idf = records_idf(ctx.records)  # one lexical corpus for every split

    def slates(rs):
        return pad_records(rs, llm=ctx.llm.name, width=width, relevance_threshold=ctx.threshold, idf=idf)

    def prior():  # calibrated_utility learns its ranker-free prior on these rows
        rows = _rows_with_annotations(ctx, select_split(ctx.records, sc.get("prior_split", "train")))
        if not rows:
            raise ValueError(f"selectors: no annotated records in prior split {sc.get('prior_split', 'train')!r}")
        return scores_of(rows), slates(rows)

    fit_scores, test_scores = scores_of(fit_records), scores_of(test_records)
    systems = {f"{sc.scores}@{k}": top_k_by(test_records, test_scores, k)}
    chosen = {}
    for kind in sc.kinds:
        selector, _ = fit_selector_with_prior(str(kind), fit_scores, slates(fit_records), prior, gamma=float(cfg.gamma),
                                              fit_on="train", output_dir=str(ctx.run_dir / "selectors" / str(kind)))
        ks = np.minimum(select_k(selector, test_scores, slates(test_records)), int(sc.max_k))
        systems[f"{sc.scores}+{kind}"] = top_k_by(test_records, test_scores, ks)
        chosen[str(kind)] = ks
    _, metrics = report_systems(test_records, systems, run_dir=ctx.run_dir, logger=ctx.logger, llm=ctx.llm.name, k=k,
                                gamma=float(cfg.gamma), relevance_threshold=ctx.threshold,
                                match_rule=str(cfg.match_rule), chosen_k=chosen,
                                scorer=ctx.llm.scorer if ctx.uses_llm() else None,
                                title=f"dynamic-k selectors on {cfg.dataset.name} ({sc.scores} scores), "
                                      f"fitted on {sc.fit_split}, {len(test_records)} test queries")
    return metrics


def mode_correlation(ctx: EvalContext) -> dict[str, float]:
    """The correlation study: per-query Spearman / Kendall between each metric and end-to-end outcomes."""
    from udcg_ltr.studies.correlation import run_correlation_study

    cfg, cc = ctx.cfg, ctx.cfg.correlation
    records = ctx.records
    if cc.limit_queries:
        records = records[: int(cc.limit_queries)]
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
            scorer = ctx.llm.scorer
    else:
        k = int(cfg.k)
        sweep_mode = "resample" if sweep_mode == "auto" else sweep_mode
        ctx.llm.ensure_annotations(records, answers=True)
        sampling = ContextSamplingConfig(n_contexts=int(cc.n_contexts), k=k, top_n=int(cc.top_n),
                                         positive_fraction=float(cc.positive_fraction), seed=int(cfg.seed))
        contexts = sample_contexts(records, sampling)
        scorer = ctx.llm.scorer
        runs = run_contexts(records, contexts, scorer, rule=str(cfg.match_rule), relevance_threshold=ctx.threshold)
    if cc.get("answer_prob") and ctx.llm.name is not None:  # the ANSWER_PROB baseline (cached teacher forcing)
        in_study = {r.qid for r in runs}
        annotate_records([r for r in records if r.qid in in_study], ctx.llm.scorer, fields=["answer_logprob"],
                         progress=True)
    study = run_correlation_study(
        records, runs, llm=ctx.llm.name, k=k, fit_splits=tuple(cc.fit_splits), report_split=cc.report_split,
        C=cc.C if cc.C == "cv" else float(cc.C), n_bootstrap=int(cc.n_bootstrap), seed=int(cfg.seed),
        out_dir=ctx.run_dir / "correlation", k_sweep=k_sweep, sweep_mode=sweep_mode, scorer=scorer,
        rule=str(cfg.match_rule), relevance_threshold=ctx.threshold, na_policy=str(cc.na_policy),
        logger=None, title=f"{cfg.dataset.name}: metric-accuracy correlation")
    if ctx.wandb_run() is not None:
        study.log_to(ctx.wandb_run())
    print("\n" + study.markdown)
    print(study.bench_line())
    return {f"correlation/spearman/{row['metric']}": row["spearman"] for row in study.rows}


def mode_study(ctx: EvalContext, name: str) -> dict[str, float]:
    """One of the paper's analyses (:mod:`udcg_ltr.studies`) with the parameters under ``studies.<name>``.

    The LLM answers through the run's annotation cache (``ctx.llm.scorer`` is a ``CachedScorer``), so a
    rerun costs no LLM time. ``context_size`` on a dataset with ready-made runs (``contexts_path``)
    truncates those runs instead of asking the LLM.
    """
    cfg = ctx.cfg
    run, _ = get_study(name)
    params = OmegaConf.to_container(cfg.studies[name], resolve=True) if cfg.get("studies") and name in cfg.studies else {}
    params.setdefault("seed", int(cfg.seed))
    params.setdefault("rule", str(cfg.match_rule))
    params.setdefault("relevance_threshold", ctx.threshold)
    params.setdefault("dataset", str(cfg.dataset.name))  # named in the study's plot titles
    if ctx.llm.name is None:
        raise ValueError(f"mode={name} needs an LLM (llm=demo, llm=smollm2, ...)")
    if name == "context_size" and cfg.dataset.get("contexts_path"):
        source = load_shared_runs(ctx.records, path=cfg.dataset.contexts_path, rule=str(cfg.match_rule))
    else:
        source = ctx.llm.scorer
    report = run(ctx.records, source, llm=ctx.llm.name, out_dir=ctx.run_dir / name, logger=ctx.logger,
                 cache=False, **params)
    print("\n" + report.markdown)
    return {f"{name}/{key}": value for key, value in report.scalars.items()}


def mode_sweep_summary(ctx: EvalContext) -> dict[str, float]:
    if not ctx.cfg.sweep_dir:
        raise ValueError("mode=sweep_summary needs sweep_dir=<multirun folder>")
    paths = summarize_sweep(ctx.cfg.sweep_dir)
    print(Path(paths["markdown"]).read_text(encoding="utf-8"))
    if "plot" in paths:
        ctx.logger.log_image("sweep_summary", paths["plot"])
    return {}


MODES: dict[str, Callable[[EvalContext], dict[str, float]]] = {
    "metrics": mode_metrics,
    "reranker": mode_reranker,
    "selectors": mode_selectors,
    "correlation": mode_correlation,
    "sweep_summary": mode_sweep_summary,
    "distractors": lambda ctx: mode_study(ctx, "distractors"),
    "position": lambda ctx: mode_study(ctx, "position"),
    "oracle_contexts": lambda ctx: mode_study(ctx, "oracle"),
    "context_size": lambda ctx: mode_study(ctx, "context_size"),
}


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    mode = str(cfg.mode)

    def check() -> None:
        validate_config(cfg, mode=mode, known_modes=list(MODES))

    def body(run_dir: Path, logger: RunLogger) -> dict[str, float]:
        t0 = time.perf_counter()
        ctx = EvalContext(cfg, run_dir, logger)
        metrics = {k: float(v) for k, v in MODES[mode](ctx).items()
                   if isinstance(v, (int, float, np.floating)) and not isinstance(v, bool)}
        metrics["time/total_s"] = time.perf_counter() - t0
        logger.log_metrics(metrics)
        return metrics

    return run_job(cfg, job_type=f"evaluate/{mode}", body=body, check=check)
