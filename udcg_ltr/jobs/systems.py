"""Evaluating *systems* that each pick one context per query (retriever top-k, reranker top-k, a dynamic-k
selector, an oracle ...): the metric table of every system's contexts and, with an LLM, end to end.

A system's output is one passage-id list per query, in prompt order. Relevance is judged on each query's
whole judged pool: a query the TREC qrels do not judge is NA in the means and counted, as trec_eval does.
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
from udcg_ltr.data.scores import PassageScores
from udcg_ltr.jobs.plots import outcomes_figure, systems_figure
from udcg_ltr.metrics._common import mean, rank_by_scores, take_ranked
from udcg_ltr.metrics.erag import erag_labels
from udcg_ltr.metrics.table import ERAGLabels, JudgedPool, MetricOptions, RankedRows, metric_table, trec_table
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.models.evaluation import scored_slates
from udcg_ltr.report import save_figure, write_csv, write_table


@dataclass
class SystemResult:
    name: str
    per_query: dict[str, np.ndarray]
    outcomes: list[str] | None = None
    context_sizes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    n_unjudged: int | None = None  # queries the qrels do not judge (NA in the relevance columns); None: no qrels

    def summary(self) -> dict[str, float]:
        out = {name: mean(v).value for name, v in self.per_query.items()}
        out["mean_k"] = float(self.context_sizes.mean()) if len(self.context_sizes) else float("nan")
        if self.n_unjudged is not None:
            out["unjudged_queries"] = float(self.n_unjudged)
        if self.outcomes is not None:
            n = max(len(self.outcomes), 1)
            for o in ("correct", "abstained", "wrong"):
                out[f"{o}_rate"] = sum(x == o for x in self.outcomes) / n
        return out


@dataclass(frozen=True)
class ReportTarget:
    """Where a report goes: ``run_dir`` (its tables and plots), the experiment ``logger`` (None: none) and the
    ``title`` of its tables and figures."""

    run_dir: str | Path
    logger: Any = None
    title: str = ""


def retrieval_scores(records: Sequence[QueryRecord]) -> PassageScores:
    """Scores that reproduce the retriever's order: minus the rank when ranks exist, else the score."""
    return PassageScores.of(records, [
        -np.array([p.rank for p in r.passages], dtype=np.float64) if all(p.rank is not None for p in r.passages)
        else np.array([p.score if p.score is not None else -np.inf for p in r.passages]) for r in records])


def utility_scores(records: Sequence[QueryRecord], llm: str, relevance_threshold: int = 1) -> PassageScores:
    """Each passage's utility for ``llm`` (Eq. 2): the order of the utility oracle."""
    return PassageScores.of(records, [[p.utility(llm, relevance_threshold) for p in r.passages] for r in records])


def context_metrics(records: Sequence[QueryRecord], contexts: Sequence[Sequence[str]], *, llm: str | None, k: int,
                    gamma: float = DEFAULT_GAMMA, alpha=None, beta=None,
                    relevance_threshold: int = 1) -> dict[str, np.ndarray]:
    """The metric table of each query's context (columns in prompt order), relevance judged on the whole pool.

    UDCG_theta uses the first ``len(context)`` weights ``alpha``/``beta``; eRAG labels grade each passage's
    single-passage answer (``answer_alone``) with ``contains`` (the end-to-end rule)."""
    sub = [QueryRecord(qid=r.qid, question=r.question, answers=r.answers, split=r.split,
                       passages=[r.passage(pid) for pid in ctx]) for r, ctx in zip(records, contexts)]
    width = max(k, max((len(c) for c in contexts), default=0), 1)
    slates = pad_records(sub, llm=llm, width=width, relevance_threshold=relevance_threshold, order="given",
                         selector_features=False)
    pools = judged_pools(records, relevance_threshold)  # the whole pool: qrels, else every passage of the record
    erag = None
    if llm is not None:
        answers = [[r.passage(pid).annotations.get(llm, {}).get("answer_alone") for pid in ctx]
                   for r, ctx in zip(records, contexts)]
        if any(a is not None for row in answers for a in row):
            erag = erag_labels(answers, [r.answers for r in records], "contains", width=slates.shape[1])
    scores = np.where(slates.mask, slates.retrieval_score, 0.0)
    rows = RankedRows(utilities=slates.utility if llm is not None else None,
                      scores=scores if np.isfinite(scores).all() else None)
    pool = JudgedPool(n_relevant=pools.n_relevant, ideal_gains=pools.ideal_gains, ideal_mask=pools.ideal_mask,
                      judged=pools.judged)
    return metric_table(slates, options=MetricOptions(k=k, gamma=gamma, alpha=alpha, beta=beta), rows=rows,
                        pool=pool, erag_labels=None if erag is None else ERAGLabels(erag, slates.mask & np.isfinite(erag)))


def evaluate_systems(records: Sequence[QueryRecord], systems: Mapping[str, Sequence[Sequence[str]]], *,
                     llm: str | None, k: int, gamma: float = DEFAULT_GAMMA, theta: Any = None, scorer: Any = None,
                     relevance_threshold: int = 1, match_rule: str = "contains") -> list[SystemResult]:
    """Metric table (and, given an LLM ``scorer``, correct / abstained / wrong) for every system's contexts;
    ``theta``: :class:`udcg_ltr.fit.weights.UDCGThetaWeights` for UDCG_theta."""
    alpha, beta = (None, None) if theta is None else (np.asarray(theta.alpha), np.asarray(theta.beta))
    pools = judged_pools(records, relevance_threshold)
    n_unjudged = pools.n_unjudged if pools.from_qrels.any() else None
    results = []
    for name, contexts in systems.items():
        contexts = [list(c) for c in contexts]
        per_query = context_metrics(records, contexts, llm=llm, k=k, gamma=gamma, alpha=alpha, beta=beta,
                                    relevance_threshold=relevance_threshold)
        outcomes = None if scorer is None else end_to_end_selection(
            records, contexts, scorer, relevance_threshold=relevance_threshold, match_rule=match_rule,
            return_outcomes=True)["outcomes"]
        results.append(SystemResult(name=name, per_query=per_query, outcomes=outcomes, n_unjudged=n_unjudged,
                                    context_sizes=np.array([len(c) for c in contexts], dtype=float)))
    return results


def trec_metrics(records: Sequence[QueryRecord], scores, *, relevance_threshold: int = 1,
                 cutoffs: Sequence[int] = (5, 10), ties: str = "stable") -> dict[str, np.ndarray]:
    """trec_eval's measures of each query's full ranking by ``scores`` (:class:`PassageScores` or what
    :func:`~udcg_ltr.data.scores.as_passage_scores` takes), R and the ideal from the judged pool:
    trec_eval's values (``-l relevance_threshold``) with ``ties="trec"``, and with ``"stable"`` if no ties."""
    _, slates, padded = scored_slates(records, scores, None, relevance_threshold)
    order = rank_by_scores(padded, slates.mask, ties=ties, ids=slates.pids)
    return trec_table(take_ranked(slates.relevance, order), take_ranked(slates.mask, order),
                      ideal_gains=slates.ideal_gains, ideal_mask=slates.ideal_mask, n_relevant=slates.n_relevant,
                      judged=slates.judged, threshold=relevance_threshold, cutoffs=cutoffs)


def _publish(run_dir, name: str, rows: list[dict[str, Any]], logger, **table_kw: Any) -> None:
    """Write ``run_dir/{name}.md`` / ``.csv``, log the table as ``name`` and print it."""
    paths = write_table(Path(run_dir) / name, rows, **table_kw)
    if logger is not None and rows:
        columns = list(rows[0])
        logger.log_table(name, [[row[c] for c in columns] for row in rows], columns)
    print("\n" + paths["md"].read_text(encoding="utf-8"))


def report_trec(records: Sequence[QueryRecord], rankings: Mapping[str, Any], *, run_dir,
                logger=None, title: str = "", relevance_threshold: int = 1, cutoffs: Sequence[int] = (5, 10),
                ties: str = "stable") -> dict[str, float]:
    """The TREC table (``trec.md`` / ``.csv``, logged): :func:`trec_metrics` of every ranking (system name ->
    :class:`PassageScores` or per-record arrays). Returns
    ``test/trec/{system}/{measure}`` plus ``test/trec/judged_queries`` and ``test/trec/unjudged_queries``."""
    pools = judged_pools(records, relevance_threshold)
    judged = int(pools.judged.sum())
    rows, metrics = [], {}
    for name, scores in rankings.items():
        per_query = trec_metrics(records, scores, relevance_threshold=relevance_threshold, cutoffs=cutoffs, ties=ties)
        means = {m: mean(v).value for m, v in per_query.items()}
        rows.append({"system": name, **means, "queries": judged, "unjudged_queries": pools.n_unjudged})
        metrics.update({f"test/trec/{name}/{m}": v for m, v in means.items()})
    metrics.update({"test/trec/judged_queries": float(judged), "test/trec/unjudged_queries": float(pools.n_unjudged)})
    _publish(run_dir, "trec", rows, logger, title=title or None,
             note=f"trec_eval measures (-l {relevance_threshold}); ties: {ties}; {judged} judged queries, "
                  f"{pools.n_unjudged} without qrels left out")
    return metrics


def report_systems(records: Sequence[QueryRecord], systems: Mapping[str, Sequence[Sequence[str]]], *,
                   target: ReportTarget, llm: str | None, k: int, gamma: float = DEFAULT_GAMMA, theta: Any = None,
                   scorer: Any = None, relevance_threshold: int = 1, match_rule: str = "contains",
                   chosen_k: Mapping[str, np.ndarray] | None = None
                   ) -> tuple[list[SystemResult], dict[str, float]]:
    """:func:`evaluate_systems`, then the comparison table (``results.md`` / ``.csv``), its rows per query
    (``per_query.csv``: system, qid, split, context size, metrics, outcome; for paired tests), PNG plots
    (metrics and outcomes per system, chosen-k histograms) and their logging, all to ``target``. Returns the
    results and flat metrics ``test/{system}/{metric}``."""
    run_dir, logger, title = Path(target.run_dir), target.logger, target.title
    results = evaluate_systems(records, systems, llm=llm, k=k, gamma=gamma, theta=theta, scorer=scorer,
                               relevance_threshold=relevance_threshold, match_rule=match_rule)
    _publish(run_dir, "results", [{"system": r.name, **r.summary()} for r in results], logger, title=title)
    write_csv(run_dir / "per_query.csv", [
        {"system": res.name, "qid": rec.qid, "split": rec.split, "context_size": int(res.context_sizes[i]),
         **{name: v[i] for name, v in res.per_query.items()}, **({"outcome": res.outcomes[i]} if res.outcomes else {})}
        for res in results for i, rec in enumerate(records)])
    plots = [save_figure(systems_figure(results, k, title=title), run_dir / "plots" / "systems.png")]
    if scorer is not None:
        plots.append(save_figure(outcomes_figure(results, title=title), run_dir / "plots" / "outcomes.png"))
    if chosen_k:
        from udcg_ltr.select.evaluation import plot_k_histograms

        plots.append(plot_k_histograms(dict(chosen_k), run_dir / "plots" / "chosen_k.png"))
    if logger is not None:
        for p in plots:
            logger.log_image(f"plots/{Path(p).stem}", p)
    return results, {f"test/{res.name}/{name}": value for res in results for name, value in res.summary().items()}
