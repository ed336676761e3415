"""Evaluating *systems* that each pick one context per query (retriever top-k, reranker top-k, a dynamic-k
selector, an oracle ...): the metric table of every system's contexts and, with an LLM, end to end.

A system's output is a list of passage-id lists, one per query, in prompt order. Everything here
works on those lists, so any ranking or selection method plugs in the same way.

Relevance is judged on each query's whole judged pool (:func:`udcg_ltr.data.padded.judged_pools`):
with TREC qrels, R and nDCG's ideal come from every qrel, retrieved or not, and a query the qrels
do not judge is left out of the means (NA) and counted (``unjudged_queries``), as trec_eval does.
:func:`trec_metrics` / :func:`report_trec` evaluate full rankings with trec_eval's measures. Ties
between equal scores: ``ties="stable"`` (input order) or ``"trec"`` (document id descending, as
trec_eval), see :func:`udcg_ltr.metrics.rank_by_scores`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.annotate.end_to_end import end_to_end_selection
from udcg_ltr.data.padded import judged_pools, pad_records
from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.jobs.plots import plot_outcomes, plot_systems
from udcg_ltr.metrics._common import rank_by_scores, take_ranked
from udcg_ltr.metrics.erag import erag_labels
from udcg_ltr.metrics.table import metric_table, trec_table
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.report import write_table


@dataclass
class SystemResult:
    name: str
    per_query: dict[str, np.ndarray]
    outcomes: list[str] | None = None
    context_sizes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    n_unjudged: int | None = None  # queries the qrels do not judge (NA in the relevance columns); None: no qrels

    def summary(self) -> dict[str, float]:
        out = {name: float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")
               for name, v in self.per_query.items()}
        out["mean_k"] = float(self.context_sizes.mean()) if len(self.context_sizes) else float("nan")
        if self.n_unjudged is not None:
            out["unjudged_queries"] = float(self.n_unjudged)
        if self.outcomes is not None:
            n = max(len(self.outcomes), 1)
            for o in ("correct", "abstained", "wrong"):
                out[f"{o}_rate"] = sum(x == o for x in self.outcomes) / n
        return out


def retrieval_scores(records: Sequence[QueryRecord]) -> list[np.ndarray]:
    """Scores that reproduce the retriever's order: minus the rank when ranks exist, else the score."""
    out = []
    for rec in records:
        if all(p.rank is not None for p in rec.passages):
            out.append(-np.array([p.rank for p in rec.passages], dtype=np.float64))
        else:
            out.append(np.array([p.score if p.score is not None else -np.inf for p in rec.passages]))
    return out


def context_metrics(records: Sequence[QueryRecord], contexts: Sequence[Sequence[str]], *, llm: str | None, k: int,
                    gamma: float = DEFAULT_GAMMA, alpha=None, beta=None, relevance_threshold: int = 1,
                    erag_scorer: str | None = "contains") -> dict[str, np.ndarray]:
    """The metric table of each query's context (columns in prompt order), relevance judged on the whole pool.

    R and nDCG's graded ideal come from each record's judged pool (the qrels when records carry
    them); queries the qrels do not judge are NA in the relevance columns.

    UDCG_theta uses the first ``len(context)`` positional weights when ``alpha``/``beta`` are given.
    eRAG labels grade each passage's single-passage answer (``answer_alone``) with ``erag_scorer``
    (default ``contains``, the rule the end-to-end grading uses).
    """
    sub = [QueryRecord(qid=r.qid, question=r.question, answers=r.answers, split=r.split,
                       passages=[r.passage(pid) for pid in ctx]) for r, ctx in zip(records, contexts)]
    width = max(k, max((len(c) for c in contexts), default=0), 1)
    slates = pad_records(sub, llm=llm, width=width, relevance_threshold=relevance_threshold, order="given",
                         selector_features=False)
    pools = judged_pools(records, relevance_threshold)  # the whole pool: qrels, else every passage of the record
    erag = None
    if llm is not None and erag_scorer:
        answers = [[r.passage(pid).annotations.get(llm, {}).get("answer_alone") for pid in ctx]
                   for r, ctx in zip(records, contexts)]
        if any(a is not None for row in answers for a in row):
            erag = erag_labels(answers, [r.answers for r in records], erag_scorer, width=slates.shape[1])
    scores = np.where(slates.mask, slates.retrieval_score, 0.0)
    return metric_table(slates, k=k, gamma=gamma, alpha=alpha, beta=beta, n_relevant=pools.n_relevant,
                        ideal_gains=pools.ideal_gains, ideal_mask=pools.ideal_mask, judged=pools.judged,
                        erag_labels=erag, erag_mask=None if erag is None else slates.mask & np.isfinite(erag),
                        utilities=slates.utility if llm is not None else None,
                        scores=scores if np.isfinite(scores).all() else None)


def evaluate_systems(records: Sequence[QueryRecord], systems: Mapping[str, Sequence[Sequence[str]]], *,
                     llm: str | None, k: int, gamma: float = DEFAULT_GAMMA, theta: Any = None, scorer: Any = None,
                     relevance_threshold: int = 1, match_rule: str = "contains") -> list[SystemResult]:
    """Metric table (and, given an LLM ``scorer``, correct / abstained / wrong) for every system's contexts.

    ``theta`` is a :class:`udcg_ltr.fit.weights.UDCGThetaWeights` (its alpha/beta feed UDCG_theta).
    ``scorer`` answers each context through the annotation cache (a CachedScorer), so systems that
    pick the same context for a query cost one LLM call.
    """
    alpha = None if theta is None else np.asarray(theta.alpha)
    beta = None if theta is None else np.asarray(theta.beta)
    pools = judged_pools(records, relevance_threshold)
    n_unjudged = pools.n_unjudged if pools.from_qrels.any() else None
    results = []
    for name, contexts in systems.items():
        contexts = [list(c) for c in contexts]
        per_query = context_metrics(records, contexts, llm=llm, k=k, gamma=gamma, alpha=alpha, beta=beta,
                                    relevance_threshold=relevance_threshold)
        outcomes = None
        if scorer is not None:
            outcomes = end_to_end_selection(records, contexts, scorer, relevance_threshold=relevance_threshold,
                                            match_rule=match_rule, return_outcomes=True)["outcomes"]
        results.append(SystemResult(name=name, per_query=per_query, outcomes=outcomes,
                                    context_sizes=np.array([len(c) for c in contexts], dtype=float),
                                    n_unjudged=n_unjudged))
    return results


def trec_metrics(records: Sequence[QueryRecord], scores: Sequence[np.ndarray], *, relevance_threshold: int = 1,
                 cutoffs: Sequence[int] = (5, 10), ties: str = "stable") -> dict[str, np.ndarray]:
    """trec_eval's measures (:func:`udcg_ltr.metrics.table.trec_table`) of each query's full ranking by ``scores``.

    ``scores`` are per-record arrays aligned with ``record.passages``; relevance is the passages'
    grades, R and the ideal the judged pool (the qrels when records carry them). With
    ``ties="trec"`` the values equal trec_eval's (``-l relevance_threshold``) on the run the scores
    make; with ``"stable"`` they do wherever no two passages of a query share a score.
    """
    n = len(records)
    width = max((len(r.passages) for r in records), default=0)
    padded = np.full((n, width), -np.inf)
    grades = np.zeros((n, width))
    ids = np.full((n, width), "", dtype=object)
    mask = np.zeros((n, width), dtype=bool)
    for i, (rec, s) in enumerate(zip(records, scores)):
        s = np.asarray(s, dtype=np.float64)
        if s.shape != (len(rec.passages),):
            raise ValueError(f"query {rec.qid!r}: {len(rec.passages)} passages but {s.shape} scores")
        padded[i, :len(s)] = s
        grades[i, :len(s)] = [p.relevance or 0 for p in rec.passages]
        ids[i, :len(s)] = [p.pid for p in rec.passages]
        mask[i, :len(s)] = True
    order = rank_by_scores(np.where(mask, padded, 0.0), mask, ties=ties, ids=ids)
    pools = judged_pools(records, relevance_threshold)
    return trec_table(take_ranked(grades, order), take_ranked(mask, order), ideal_gains=pools.ideal_gains,
                      ideal_mask=pools.ideal_mask, n_relevant=pools.n_relevant, judged=pools.judged,
                      threshold=relevance_threshold, cutoffs=cutoffs)


def report_trec(records: Sequence[QueryRecord], rankings: Mapping[str, Sequence[np.ndarray]], *, run_dir,
                logger=None, title: str = "", relevance_threshold: int = 1, cutoffs: Sequence[int] = (5, 10),
                ties: str = "stable", prefix: str = "test/") -> dict[str, float]:
    """The TREC table: :func:`trec_metrics` of every ranking (``{system: per-record scores}``), written to
    ``trec.md`` / ``trec.csv`` beside ``results`` and logged. Returns ``{prefix}trec/{system}/{measure}``
    plus ``{prefix}trec/judged_queries`` and ``{prefix}trec/unjudged_queries`` (left out of every mean)."""
    pools = judged_pools(records, relevance_threshold)
    rows, metrics = [], {}
    for name, scores in rankings.items():
        per_query = trec_metrics(records, scores, relevance_threshold=relevance_threshold, cutoffs=cutoffs, ties=ties)
        means = {m: float(np.nanmean(v)) if np.isfinite(v).any() else float("nan") for m, v in per_query.items()}
        rows.append({"system": name, **means, "queries": int(pools.judged.sum()), "unjudged_queries": pools.n_unjudged})
        metrics.update({f"{prefix}trec/{name}/{m}": v for m, v in means.items()})
    metrics[f"{prefix}trec/judged_queries"] = float(pools.judged.sum())
    metrics[f"{prefix}trec/unjudged_queries"] = float(pools.n_unjudged)
    note = (f"trec_eval measures (-l {relevance_threshold}); ties: {ties}; {int(pools.judged.sum())} judged queries, "
            f"{pools.n_unjudged} without qrels left out")
    paths = write_table(Path(run_dir) / "trec", rows, title=title or None, note=note)
    if logger is not None and rows:
        columns = list(rows[0])
        logger.log_table("trec", [[row[c] for c in columns] for row in rows], columns)
    print("\n" + paths["md"].read_text(encoding="utf-8"))
    return metrics


def results_rows(results: Sequence[SystemResult], columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One row per system (``system`` + its mean metrics), ready for :func:`udcg_ltr.report.write_table`."""
    rows = []
    for r in results:
        summary = r.summary()
        keys = columns if columns else list(summary)
        rows.append({"system": r.name, **{k: summary.get(k, float("nan")) for k in keys}})
    return rows


def report_systems(records: Sequence[QueryRecord], systems: Mapping[str, Sequence[Sequence[str]]], *, run_dir,
                   logger=None, title: str = "", llm: str | None, k: int, gamma: float = DEFAULT_GAMMA,
                   theta: Any = None, scorer: Any = None, relevance_threshold: int = 1, match_rule: str = "contains",
                   chosen_k: Mapping[str, np.ndarray] | None = None, prefix: str = "test/") -> tuple[list[SystemResult], dict[str, float]]:
    """:func:`evaluate_systems`, then the comparison table (``results.md`` / ``.csv``), PNG plots
    (metrics per system, outcomes per system, chosen-k histograms) and their logging. Returns the
    results and flat metrics ``{prefix}{system}/{metric}``."""
    run_dir = Path(run_dir)
    results = evaluate_systems(records, systems, llm=llm, k=k, gamma=gamma, theta=theta, scorer=scorer,
                               relevance_threshold=relevance_threshold, match_rule=match_rule)
    rows = results_rows(results)
    paths = write_table(run_dir / "results", rows, title=title)
    plots = [plot_systems(results, k, run_dir / "plots" / "systems.png", title=title)]
    if scorer is not None:
        plots.append(plot_outcomes(results, run_dir / "plots" / "outcomes.png", title=title))
    if chosen_k:
        from udcg_ltr.select.evaluation import plot_k_histograms

        plots.append(plot_k_histograms(dict(chosen_k), run_dir / "plots" / "chosen_k.png"))
    if logger is not None:
        columns = list(rows[0])
        logger.log_table("results", [[row[c] for c in columns] for row in rows], columns)
        for p in plots:
            logger.log_image(f"plots/{Path(p).stem}", p)
    metrics = {f"{prefix}{res.name}/{name}": value for res in results for name, value in res.summary().items()}
    print("\n" + paths["md"].read_text(encoding="utf-8"))
    return results, metrics
