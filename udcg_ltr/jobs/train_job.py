"""The body of ``train.py``: run the configured stages (``model.stages``) in order and return the metrics.

* ``annotate``: P(NO-RESPONSE) (and single-passage answers) of the LLM for every passage, unless present;
* ``udcg_theta``: end-to-end answers on sampled contexts, then the UDCG_theta weights (pairwise hinge, Eq. 3);
* ``cross_encoder``: a reranker trained with ``loss`` on the train split, validated on UDCG@k;
* ``dynamic_k``: a dynamic-k selector fitted on held-out (val) scores;
* ``evaluate``: every system's contexts on the test split (retriever top-k, reranker top-k, reranker +
  selector, utility oracle) scored with the metric table and, with an LLM, end to end.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

from udcg_ltr.annotate.end_to_end import load_shared_runs, run_contexts, run_summary
from udcg_ltr.data.jsonl import write_records
from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.data.scores import PassageScores
from udcg_ltr.fit.pairs import build_context_table
from udcg_ltr.fit.sampling import ContextSamplingConfig, sample_contexts
from udcg_ltr.fit.weights import plot_weights, save_weights
from udcg_ltr.io import atomic_write_json
from udcg_ltr.jobs.common import JobContext, has_annotations, run_job, subsample
from udcg_ltr.jobs.settings import TrainSettings
from udcg_ltr.jobs.systems import ReportTarget, report_systems, retrieval_scores, utility_scores
from udcg_ltr.models.evaluation import top_k_by
from udcg_ltr.models.fusion import fit_fusion_weight, fuse_scores
from udcg_ltr.models.precision import on_gpu, resolve_precision
from udcg_ltr.tracking import RunLogger, log_artifact

log = logging.getLogger("udcg_ltr.train")


class PipelineState(JobContext):
    """What the stages hand to each other (beyond :class:`JobContext`)."""

    settings: TrainSettings

    def __init__(self, cfg: DictConfig, settings: TrainSettings, run_dir: Path, logger: RunLogger):
        super().__init__(cfg, settings, run_dir, logger)
        self.metrics: dict[str, float] = {}
        self.theta: Any = None
        self.scores = PassageScores()  # the reranker's (fused) scores of every question it scored
        self.alone = PassageScores()  # with retriever fusion: the cross-encoder's own scores
        self.selector: Any = None

    def record_metrics(self, metrics: dict[str, Any], prefix: str = "") -> None:
        clean = {f"{prefix}{k}": float(v) for k, v in metrics.items()
                 if isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool)}
        self.metrics.update(clean)
        self.logger.log_metrics(clean)


def stage_annotate(state: PipelineState) -> None:
    summary = state.ensure_annotations(state.records, answers=state.settings.annotate.answers)
    counts = {f"annotate/{task}_{kind}": n for task, c in summary.get("by_task", {}).items() for kind, n in c.items()}
    state.record_metrics({"annotate/passages": sum(len(r.passages) for r in state.records), **counts})
    if summary:
        write_records(state.run_dir / "annotated.jsonl.gz", state.records)


def stage_udcg_theta(state: PipelineState) -> None:
    from udcg_ltr.fit.theta import fit_udcg_theta  # a LightningModule fit: Lightning loads when it runs

    s, mcfg = state.settings, state.settings.model.udcg_theta
    fit_records = state.split(mcfg.fit_splits)
    if not fit_records:
        raise ValueError(f"udcg_theta: no records in splits {mcfg.fit_splits}")
    if s.dataset.contexts_path:  # ready-made end-to-end runs (the shared annotated SQuAD set)
        fit_qids = {r.qid for r in fit_records}
        runs = [r for r in load_shared_runs(state.records, path=s.dataset.contexts_path) if r.qid in fit_qids]
    else:
        sampling = ContextSamplingConfig(n_contexts=mcfg.n_contexts, k=s.k, top_n=mcfg.top_n, seed=s.seed)
        runs = run_contexts(fit_records, sample_contexts(fit_records, sampling), state.scorer,
                            rule=s.match_rule, relevance_threshold=state.threshold)
    summary = run_summary(runs)
    log.info("udcg_theta: %d contexts on %d queries: %s", len(runs), len({r.qid for r in runs}), summary)
    table = build_context_table(state.records, runs, state.llm_name, k=s.k, relevance_threshold=state.threshold)
    weights = fit_udcg_theta(table, variant=mcfg.variant, C=mcfg.C)
    path = save_weights(state.run_dir / "udcg_theta" / f"weights_k{weights.k}.json", weights)
    png = plot_weights([weights], state.run_dir / "udcg_theta" / f"weights_k{weights.k}.png")
    state.logger.log_image("udcg_theta/weights", png)
    log_artifact(state.logger, path, name=f"udcg_theta-{s.dataset.name}-k{weights.k}", type="model",
                 metadata={**weights.meta, "k": weights.k, "variant": weights.variant, "llm": state.llm_name,
                           "dataset": s.dataset.name, "fit_splits": mcfg.fit_splits})
    state.theta = weights
    state.record_metrics({"n_pairs": weights.meta["n_pairs"],  # fit_udcg_theta's provenance
                          "train_pairwise_accuracy": weights.meta["train_pairwise_accuracy"],
                          **{f"outcome_{k}": v for k, v in summary.items()}}, prefix="udcg_theta/")
    log.info("udcg_theta: weights saved to %s", path)


def split_groups(splits: str | list[str] | None) -> list[str | None]:
    """The evaluated ``splits`` as selections for :meth:`JobContext.split`, one per split: a name, each name of a
    list, or ``None`` (every record, one group)."""
    if splits is None:
        return [None]
    return [splits] if isinstance(splits, str) else list(splits)


def stage_cross_encoder(state: PipelineState) -> None:
    from udcg_ltr.models.reranker import Reranker, save_retriever_fusion
    from udcg_ltr.models.training import FitConfig, fit_reranker

    s, mcfg, trainer = state.settings, state.settings.model.cross_encoder, state.settings.trainer
    # Seeded subsamples (all questions when null), the same for every loss and model seed of a comparison.
    train = subsample(state.split(mcfg.train_split), mcfg.train_questions, mcfg.train_subsample_seed)
    val = subsample(state.split(mcfg.val_split), mcfg.val_questions, mcfg.val_subsample_seed)
    loss_name, loss_kwargs = s.loss_spec()
    # The scoring after training: the trainer's device, its precision unless eval_precision names another
    # (resolved first: a bad name must not cost the training).
    precision = resolve_precision(mcfg.eval_precision or trainer.precision, trainer.accelerator)
    # The Trainer and its callbacks are instantiated from their _target_ configs (conf/trainer, conf/callbacks).
    config = FitConfig(llm=state.llm_name, model_name_or_path=mcfg.pretrained, loss=loss_name, loss_kwargs=loss_kwargs,
                       k=s.k, gamma=s.gamma, batch_size=mcfg.batch_size, lr=mcfg.lr, weight_decay=mcfg.weight_decay,
                       warmup=mcfg.warmup, max_length=mcfg.max_length, relevance_threshold=state.threshold,
                       seed=s.seed)
    path, metrics = fit_reranker(train, val, config, output_dir=state.run_dir / "cross_encoder",
                                 logger=state.logger.lightning(), trainer_config=state.cfg.trainer,
                                 callback_configs=state.cfg.callbacks or {}, loader=vars(s.loader))
    # What the model has seen: a later job on these records leaves these questions out.
    atomic_write_json(state.run_dir / "cross_encoder" / "questions.json",
                      {"train": [r.qid for r in train], "val": [r.qid for r in val]})
    state.record_metrics(metrics, prefix="cross_encoder/")
    log_artifact(state.logger, path, name=f"reranker-{s.dataset.name}-{loss_name}", type="model",
                 metadata={"base_model": mcfg.pretrained or "None", "loss": loss_name, "loss_kwargs": loss_kwargs,
                           "k": s.k, "gamma": s.gamma, "llm": state.llm_name,
                           "dataset": s.dataset.name, "train_split": mcfg.train_split, **metrics})
    reranker = Reranker.from_pretrained(path, batch_size=mcfg.eval_batch_size, max_length=mcfg.max_length,
                                        device="cuda" if on_gpu(trainer.accelerator) else "cpu",
                                        precision=precision)
    later = split_groups(s.splits)  # the splits the later stages read
    if "dynamic_k" in s.model.stages:
        later.append(s.model.dynamic_k.fit_split)
    scored: list[QueryRecord] = []
    scores = PassageScores()
    for group in [val, *map(state.split, later)]:  # one call per split: batches never mix splits
        todo = [r for r in group if r.qid not in scores]
        scored += todo
        scores = scores.merge(reranker.score_records(todo, progress=True, fuse=False))
    if mcfg.retriever_fusion:  # interpolate with the retriever's score, weight chosen on val
        weight, curve = fit_fusion_weight(val, scores, state.llm_name, s.k,
                                          gamma=s.gamma, relevance_threshold=state.threshold)
        save_retriever_fusion(path, weight)
        state.alone = scores
        scores = fuse_scores(scored, scores, weight)
        state.record_metrics({"retriever_fusion": weight, **{f"val_udcg_fusion_{w:g}": v for w, v in curve.items()}},
                             prefix="cross_encoder/")
        log.info("cross_encoder: retriever fusion weight %g (val UDCG@%d by weight: %s)", weight, s.k, curve)
    state.scores = state.scores.merge(scores)
    log.info("cross_encoder: saved to %s", path)


def _ranking_scores(state: PipelineState, records: list[QueryRecord]) -> PassageScores:
    """Reranker scores when a reranker ran, else the retriever's order."""
    return retrieval_scores(records) if state.scores.missing(records) else state.scores


def stage_dynamic_k(state: PipelineState) -> None:
    from udcg_ltr.select.training import fit_selector_with_prior

    mcfg = state.settings.model.dynamic_k
    # Held-out scores only: the reranker is over-confident on its own training queries.
    fit_records = state.split(mcfg.fit_split)
    if not fit_records:
        raise ValueError(f"dynamic_k: no records in split {mcfg.fit_split!r}")

    def prior():  # calibrated_utility: its ranker-free prior may learn from the reranker's training split
        records = state.split(mcfg.prior_split)
        if not records:
            raise ValueError(f"dynamic_k: no records in prior split {mcfg.prior_split!r}")
        return _ranking_scores(state, records), state.slates(records)

    state.selector, metrics = fit_selector_with_prior(
        mcfg.selector, _ranking_scores(state, fit_records), state.slates(fit_records), prior,
        gamma=state.settings.gamma, fit_on="train", output_dir=state.run_dir / "dynamic_k", **mcfg.hparams)
    state.record_metrics(metrics, prefix="dynamic_k/")


def stage_evaluate(state: PipelineState) -> None:
    from udcg_ltr.select.training import select_k

    s, k, llm = state.settings, state.settings.k, state.llm_name
    records = state.split(s.splits)
    if not records:
        raise ValueError(f"evaluate: no records in splits {s.splits}")
    systems: dict[str, list[list[str]]] = {f"retriever@{k}": top_k_by(records, retrieval_scores(records), k)}
    for name, scores in ((f"reranker_alone@{k}", state.alone), (f"reranker@{k}", state.scores)):  # alone: no fusion
        if not scores.missing(records):
            systems[name] = top_k_by(records, scores, k)
    chosen_k = {}
    if state.selector is not None:
        ranking = _ranking_scores(state, records)
        ks = np.minimum(select_k(state.selector, ranking, state.slates(records)), s.model.dynamic_k.max_k)
        name = f"{'reranker' if f'reranker@{k}' in systems else 'retriever'}+{state.selector.kind}"
        systems[name] = top_k_by(records, ranking, ks)
        chosen_k[name] = ks
    if has_annotations(records, llm):
        systems[f"oracle_utility@{k}"] = top_k_by(records, utility_scores(records, llm, state.threshold), k)
    use_llm = s.end_to_end and s.dataset.has_answers and llm is not None
    title = f"{s.dataset.name}, split {s.splits}: {len(records)} queries, LLM {llm}, k = {k}"
    results, metrics = report_systems(
        records, systems, target=ReportTarget(state.run_dir, state.logger, title), llm=llm, k=k,
        gamma=s.gamma, theta=state.theta, scorer=state.scorer if use_llm else None,
        relevance_threshold=state.threshold, match_rule=s.match_rule, chosen_k=chosen_k)
    state.record_metrics(metrics)
    main = next(r for r in reversed(results) if not r.name.startswith("oracle")).summary()
    state.record_metrics({key: main.get(key, float("nan")) for key in (f"udcg@{k}", f"ndcg@{k}")}, prefix="test/")


STAGE_FUNCS = {"annotate": stage_annotate, "udcg_theta": stage_udcg_theta, "cross_encoder": stage_cross_encoder,
               "dynamic_k": stage_dynamic_k, "evaluate": stage_evaluate}


def train(cfg: DictConfig) -> dict[str, Any]:
    """Run ``model.stages`` and return the metrics (skipping a job that already finished). The settings are built,
    and so checked, before any stage: a bad loss name must not cost the annotation and fitting stages."""

    def body(settings: TrainSettings, run_dir: Path, logger: RunLogger) -> dict[str, float]:
        t0 = time.perf_counter()
        state = PipelineState(cfg, settings, run_dir, logger)
        stages = settings.model.stages
        log.info("%d records; stages %s", len(state.records), stages)
        if "evaluate" in stages:  # before the first stage: not after an hour of training
            state.check_splits("splits", settings.splits)
        for stage in stages:
            s0 = time.perf_counter()
            log.info("== stage %s ==", stage)
            STAGE_FUNCS[stage](state)
            seconds = time.perf_counter() - s0
            log.info("== stage %s done in %.1fs ==", stage, seconds)
            state.record_metrics({f"time/{stage}_s": seconds})
        state.record_metrics({"time/total_s": time.perf_counter() - t0})
        return dict(state.metrics)

    return run_job(cfg, TrainSettings, job_type="train", body=body)
