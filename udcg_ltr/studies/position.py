"""Positional bias: one relevant passage moved through positions 1..k (UDCG paper, Figure 1).

For every query with a relevant passage, ``k`` contexts are answered by the LLM: the same ``k - 1`` irrelevant
passages in the same order, the relevant passage inserted at position ``i = 1..k``. Accuracy by position
measures the LLM's positional bias ("lost in the middle": a U shape for many LLMs), next to what metrics
*predict* (:func:`predicted_curves`: nDCG, MRR and MAP fall with the position, Precision and UDCG are flat;
UDCG_theta's learned ``alpha_i``, Eq. 3, is the LLM-oriented discount the paper learns).

Statistics: bootstrap 95% CIs over queries; Cochran's Q test of equal accuracy at every position; primacy and
recency (correctness at position 1, resp. ``k``, minus the mean at positions 2..k-1, per query; a U shape
needs both CIs above 0); first vs last with McNemar's exact test.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from udcg_ltr.annotate.annotator import ensure_annotations
from udcg_ltr.annotate.end_to_end import Context
from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.fit.sampling import query_rng
from udcg_ltr.fit.weights import UDCGThetaWeights, load_weights
from udcg_ltr.metrics import average_precision, mrr, ndcg, precision, udcg
from udcg_ltr.report import (
    Column,
    draw_lines,
    fmt_float,
    fmt_p,
    fmt_pct,
    new_figure,
    save_figure,
    set_title,
    write_csv,
)
from udcg_ltr.stats.bootstrap import paired_difference
from udcg_ltr.stats.paired import cochran_q, mcnemar_exact
from udcg_ltr.studies import common
from udcg_ltr.studies.correlation import row_label


@dataclass(frozen=True)
class PositionConfig(common.StudyParams):
    """Parameters of :func:`run_positional_bias`. ``distractors``: the ``k - 1`` irrelevant passages and their
    fixed order: ``"retrieval"`` (the best-ranked, in retrieval order: the realistic case), ``"random"``
    (seeded), ``"hard"`` / ``"weak"`` (highest / lowest DE, by DE descending). ``weights``: a UDCG_theta
    weight file or ``UDCGThetaWeights`` (one or a list); the set for ``k`` (``full`` first) is used."""

    k: int = 5
    relevant: str = "top_ranked"
    distractors: str = "retrieval"
    weights: Any = None

    def __post_init__(self):
        if self.k < 2:
            raise ValueError(f"k must be >= 2, got {self.k}")
        if self.distractors not in ("retrieval", "random", "hard", "weak"):
            raise ValueError(f"distractors must be retrieval / random / hard / weak, got {self.distractors!r}")
        if self.relevant not in ("top_ranked", "best_utility"):
            raise ValueError(f"relevant must be 'top_ranked' or 'best_utility', got {self.relevant!r}")


@dataclass
class PositionPlan:
    qid: str
    relevant_pid: str
    distractors: tuple[str, ...]  # k - 1 pids in their fixed order

    def context(self, position: int) -> tuple[str, ...]:
        """The list with the relevant passage at 1-based ``position``."""
        return self.distractors[:position - 1] + (self.relevant_pid,) + self.distractors[position - 1:]


def plan_query(record: QueryRecord, llm: str, cfg: PositionConfig) -> PositionPlan | str:
    r, irr = common.pick_passages(record, llm, cfg.relevant, cfg.relevance_threshold)
    if r is None:
        return "no relevant passage"
    m = cfg.k - 1
    if len(irr) < m:
        return f"fewer than k-1={m} irrelevant passages"
    if cfg.distractors == "retrieval":
        chosen = irr[:m]
    elif cfg.distractors == "random":
        rng = query_rng(cfg.seed, record.qid, "position")
        chosen = [irr[i] for i in rng.choice(len(irr), size=m, replace=False)]
    else:
        de = np.array([common.distracting_effect(p, llm) for p in irr])
        idx = np.argsort(-de if cfg.distractors == "hard" else de, kind="stable")[:m]
        chosen = [irr[i] for i in idx[np.argsort(-de[idx], kind="stable")]]
    return PositionPlan(record.qid, r.pid, tuple(p.pid for p in chosen))


def _weight_list(weights) -> list[UDCGThetaWeights]:
    """``weights`` (a path, one object or several) as a list; a path is loaded."""
    if isinstance(weights, (str, os.PathLike)):
        return load_weights(weights)
    return [weights] if isinstance(weights, UDCGThetaWeights) else list(weights)


def select_weights(weights, k: int) -> UDCGThetaWeights | None:
    """The UDCG_theta weights for ``k`` passages from a path, one object or a list (``full`` variant preferred)."""
    fits = [] if weights is None else [w for w in _weight_list(weights) if w.k == k]
    return next((w for w in fits if w.variant == "full"), fits[0] if fits else None)


def predicted_curves(k: int, utilities: np.ndarray | None = None, theta: UDCGThetaWeights | None = None
                     ) -> dict[str, np.ndarray]:
    """Metric values ``[k]`` of a list of ``k`` with its one relevant passage at each position (the ``[k, k]``
    identity relevance matrix). ``utilities``: the ``[n_queries, k, k]`` utilities of the study's lists, for
    UDCG and UDCG_theta (averaged over queries; left out without them)."""
    rel = np.eye(k)
    curves = {"ndcg": ndcg(rel, k=k), "mrr": mrr(rel, k=k), "map": average_precision(rel, k=k),
              "precision": precision(rel, k=k)}
    if utilities is not None:
        u = utilities.reshape(-1, k)
        curves["udcg"] = udcg(u, k=k).reshape(-1, k).mean(axis=0)
        if theta is not None:
            curves["udcg_theta"] = theta.score(u).reshape(-1, k).mean(axis=0)
    return curves


def run_positional_bias(records: Sequence[QueryRecord], scorer_or_runs=None, *, llm, out_dir: str | os.PathLike,
                        logger=None, cache=True, progress: bool = True, **params) -> common.StudyReport:
    """Accuracy by position of the relevant passage vs what rank metrics predict (UDCG paper, Figure 1).

    Args: as :func:`udcg_ltr.studies.distractors.run_distractor_sensitivity`, with :class:`PositionConfig` fields."""
    cfg = common.config_from(params, PositionConfig)
    name, runner, runs, out = common.study_inputs(llm, scorer_or_runs, out_dir, cache)
    k = cfg.k
    ann = ensure_annotations(records, name, ["p_no_response"], runner, progress=progress)
    by_qid = {r.qid: r for r in records}
    chosen, info = common.select_plans(records, cfg, lambda r: plan_query(r, name, cfg))
    if not chosen:
        raise ValueError(f"no eligible query for the position study (excluded: {info['excluded']})")
    contexts = [Context(p.qid, i * k + j, p.context(j + 1), f"position {j + 1}")
                for i, p in enumerate(chosen) for j in range(k)]
    graded = common.answer_contexts(by_qid, contexts, llm=name, scorer=runner, runs=runs, rule=cfg.rule,
                                    relevance_threshold=cfg.relevance_threshold, progress=progress)
    n = len(chosen)
    ind = {o: v.reshape(n, k) for o, v in common.outcome_indicators(graded).items()}
    B, seed = cfg.n_bootstrap, cfg.seed

    # utilities of every list: [n, k (position of the relevant passage), k (slot)]
    util = np.array([[by_qid[c.qid].passage(pid).utility(name, cfg.relevance_threshold) for pid in c.pids]
                     for c in contexts]).reshape(n, k, k)
    theta = select_weights(cfg.weights, k)
    curves = predicted_curves(k, util, theta)
    rows = [{"position": j + 1, "queries": n, **common.outcome_rates(ind, B, seed, (slice(None), j)),
             **{m: float(c[j]) for m, c in curves.items()},
             **({"alpha": float(theta.alpha[j]), "beta": float(theta.beta[j])} if theta is not None else {})}
            for j in range(k)]

    correct = ind["correct"]
    q = cochran_q(correct)
    # U shape = both edges above the middle: first - middle (primacy) and last - middle (recency), per query
    middle = correct[:, 1:k - 1].mean(axis=1) if k > 2 else None
    primacy = paired_difference(correct[:, 0], middle, B, seed) if k > 2 else None
    recency = paired_difference(correct[:, k - 1], middle, B, seed) if k > 2 else None
    first_last = paired_difference(correct[:, 0], correct[:, k - 1], B, seed)
    best, worst = int(np.argmax([r["correct"] for r in rows])), int(np.argmin([r["correct"] for r in rows]))
    per_query = [{"qid": p.qid, "split": by_qid[p.qid].split, "relevant_pid": p.relevant_pid,
                  "distractors": " ".join(p.distractors),
                  **{f"outcome_pos{j + 1}": graded[i * k + j].outcome for j in range(k)}}
                 for i, p in enumerate(chosen)]

    paths: dict[str, Any] = {}
    md_cols = [Column("position", "Position"), Column("acc", "Accuracy % [95% CI]"), Column("abst", "Abstained %"),
               Column("wrongs", "Wrong %"), *(Column(m, row_label(m), fmt_float) for m in curves)]
    csv_cols = ["position", "queries", *common.OUTCOME_COLUMNS, *curves]
    if theta is not None:
        md_cols += [Column("alpha", "alpha_i", fmt_float), Column("beta", "beta_i", fmt_float)]
        csv_cols += ["alpha", "beta"]
    rendered = [{**r, "acc": common.pct_ci(r, "correct"),
                 "abst": fmt_pct(r["abstained"]), "wrongs": fmt_pct(r["wrong"])} for r in rows]
    note = (f"{n} queries, each answered with the relevant passage at every position (same k-1 irrelevant passages). "
            f"Cochran's Q = {fmt_float(q['Q'])} (df {q['df']}), p = {fmt_p(q['p'])}.")
    table_md = common.add_table(paths, "table", out / "position", rendered, md_cols, note=note,
                                csv_columns=csv_cols, title=f"Accuracy by position of the relevant passage, k = {k}")
    paths["per_query_csv"] = write_csv(out / "position_per_query.csv", per_query)
    title = common.plot_title(f"Positional bias, k = {k}", dataset=cfg.dataset, n_queries=n, llm=name,
                              by_split=info["by_split"])
    paths["png"] = save_figure(position_figure(rows, curves, theta, k=k, n=n, llm=name, title=title),
                               out / "position.png")

    tests = {"cochran_q": q, "first_minus_middle": primacy, "last_minus_middle": recency, "first_minus_last": first_last,
             "first_vs_last_mcnemar": mcnemar_exact(correct[:, 0], correct[:, k - 1])}
    weights = cfg.weights  # in the summary: the file, or which fits were given
    if weights is not None:
        weights = str(weights) if isinstance(weights, (str, os.PathLike)) else [
            f"UDCGThetaWeights(k={w.k}, variant={w.variant})" for w in _weight_list(weights)]
    meta = {"study": "position", "llm": name, "config": {**asdict(cfg), "weights": weights}, "n_queries": n,
            "n_contexts": len(graded), "selection": info, "annotations": ann, "source": "scorer" if runner else "runs",
            "theta": theta.to_dict() if theta is not None else None, "tests": tests}
    scalars = {f"acc_pos{r['position']}": r["correct"] for r in rows}
    scalars.update(n_queries=n, cochran_q_p=q["p"], first_minus_last=first_last["diff"],
                   first_minus_middle=primacy["diff"] if primacy else float("nan"),
                   last_minus_middle=recency["diff"] if recency else float("nan"))
    md = _markdown(cfg, name, rows, info, meta, tests, table_md, theta, best=best, worst=worst)
    report = common.StudyReport(name="position", rows=rows, markdown=md, paths=paths, meta=meta,
                                tables={"table": rows, "per_query": per_query}, scalars=scalars, runs=graded)
    return common.finish_report(report, out, logger)


def position_figure(rows, curves, theta, *, k: int, n: int, llm: str, title: str | None = None):
    """Accuracy (left axis, 95% CI band, values at the points) and the metric curves normalised by their
    maximum (right axis), drawn by :func:`udcg_ltr.report.draw_lines` so that no curve hides another (curves
    that coincide, e.g. MRR and MAP with one relevant passage, are drawn once with both names)."""
    fig, ax = new_figure(figsize=(8.4, 4.8))
    x = np.arange(1, k + 1)
    acc, lo, hi = (np.array([100 * r[key] for r in rows]) for key in ("correct", "correct_lo", "correct_hi"))
    ax.plot(x, acc, "-o", color="black", lw=2, label="LLM accuracy (95% CI)", zorder=5)
    ax.fill_between(x, lo, hi, color="black", alpha=0.08, lw=0)
    for xi, a in zip(x, acc):
        ax.annotate(f"{a:.1f}%", (xi, a), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=7,
                    zorder=6, bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
    ax.set(xlabel="position of the relevant passage", ylabel=f"accuracy % (95% CI, {n} queries)", xticks=x,
           ylim=(-2, 108))
    ax.grid(alpha=0.3)
    ax2 = ax.twinx()
    series = {row_label(m): y for m, y in curves.items()}
    if theta is not None:
        series["alpha_i (UDCG_theta)"] = theta.alpha
    series = {m: np.asarray(y, dtype=np.float64) for m, y in series.items()}
    peaks = {m: np.max(np.abs(y)) for m, y in series.items()}
    normalised = {m: y / peaks[m] if peaks[m] > 0 else y for m, y in series.items()}
    draw_lines(ax2, x, normalised, dodge=0.2)
    ax2.set_ylabel("metric / its maximum over positions")
    ax2.set_ylim(-0.05 if min(np.min(v) for v in normalised.values()) >= 0 else -1.05, 1.1)
    (handles, labels), (handles2, labels2) = ax.get_legend_handles_labels(), ax2.get_legend_handles_labels()
    ax.legend(handles + handles2, labels + labels2, fontsize=7, loc="upper left", bbox_to_anchor=(1.1, 1.0),
              borderaxespad=0.0)
    set_title(ax, title or f"Positional bias, k = {k}: {n} queries, LLM {llm}")
    return fig


def _markdown(cfg: PositionConfig, name, rows, info, meta, tests, table_md, theta, *, best, worst) -> str:
    q, fl, mc = tests["cochran_q"], tests["first_minus_last"], tests["first_vs_last_mcnemar"]
    pm, rm = tests["first_minus_middle"], tests["last_minus_middle"]

    def points(d) -> str:
        return f"{fmt_pct(d['diff'])} points [{fmt_pct(d['lo'])}, {fmt_pct(d['hi'])}]"

    lines = [f"# Positional bias (UDCG paper, Figure 1): LLM `{name}`, k = {cfg.k}", "",
             f"- Queries: {common.describe_selection(info, cfg.max_queries)}.",
             f"- Lists: the {'best-ranked' if cfg.relevant == 'top_ranked' else 'highest-utility'} relevant passage "
             f"inserted at each position among the same {cfg.k - 1} irrelevant passages "
             f"(chosen by: {cfg.distractors}); {meta['n_contexts']} LLM answers.",
             "- Metric columns: what each metric gives the same lists (binary relevance, the list as its own pool); "
             "UDCG / UDCG_theta: mean over queries (utilities of the study's passages).",
             f"- UDCG_theta weights: {'k=' + str(theta.k) + ', ' + theta.name if theta is not None else 'none given'}.",
             "", table_md, "",
             f"- Best position {rows[best]['position']} ({fmt_pct(rows[best]['correct'])}%), worst "
             f"{rows[worst]['position']} ({fmt_pct(rows[worst]['correct'])}%).",
             f"- Cochran's Q (equal accuracy at every position): Q = {fmt_float(q['Q'])}, df {q['df']}, "
             f"p = {fmt_p(q['p'])}."]
    if pm is not None:
        u = pm["lo"] > 0 and rm["lo"] > 0
        lines.append(f"- Primacy, position 1 minus the middle (mean of 2..{cfg.k - 1}) per query: {points(pm)}, "
                     f"paired bootstrap p = {fmt_p(pm['p_bootstrap'])}; recency, position {cfg.k} minus the middle: "
                     f"{points(rm)}, p = {fmt_p(rm['p_bootstrap'])}. U shape (both CIs above 0): {'yes' if u else 'no'}.")
    lines.append(f"- First minus last: {points(fl)}, "
                 f"McNemar exact p = {fmt_p(mc['p'])} ({mc['only_a']} correct only first, {mc['only_b']} only last).")
    lines += ["", f"Statistics: bootstrap percentile 95% CIs over queries ({cfg.n_bootstrap} resamples, seed "
              f"{cfg.seed}); correct = gold answer contained in the answer, relevant passage in the context."]
    return "\n".join(lines) + "\n"
