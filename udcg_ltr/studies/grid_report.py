"""Rendering the grid's results (:mod:`udcg_ltr.studies.grid`): markdown tables, the bench lines and figures.
Nothing here computes a statistic or writes a file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from udcg_ltr.report import (
    Column,
    bars_figure,
    fmt_ci,
    fmt_float,
    fmt_p,
    markdown_table,
    new_figure,
    set_title,
)

#: How each correlation row is shown.
LABELS = {"udcg": "UDCG", "udcg_theta": "UDCG_theta", "udcg_gamma_star": "UDCG (gamma*)", "ndcg": "nDCG",
          "mrr": "MRR", "map": "MAP", "precision": "Precision", "hits": "HITS", "erag": "eRAG", "ra_nwg": "RA-nWG"}
#: The metrics of the README's headline figure.
HEADLINE_METRICS: tuple[str, ...] = ("udcg", "udcg_theta", "ndcg", "erag")


def _ci(row: Mapping[str, Any], key: str) -> str:
    return fmt_ci(row[key], row[f"{key}_lo"], row[f"{key}_hi"])


def correlation_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    shown = [{"metric": LABELS[r["metric"]], "spearman": _ci(r, "spearman"), "kendall": _ci(r, "kendall"),
              "diff": fmt_ci(r["spearman_diff_vs_ndcg"], r["spearman_diff_lo"], r["spearman_diff_hi"]),
              "p": fmt_p(r["spearman_p_vs_ndcg"]), "n": r["spearman_n"]} for r in rows]
    return markdown_table(shown, [Column("metric", "Metric"), Column("spearman", "Spearman [95% CI]"),
                                  Column("kendall", "Kendall tau-b [95% CI]"), Column("diff", "Spearman - nDCG"),
                                  Column("p", "p"), Column("n", "queries")])


def outcome_markdown(rows: Sequence[Mapping[str, Any]], first: str, first_header: str) -> str:
    shown = [{first: r[first], **{o: _ci(r, o) for o in ("correct", "abstained", "wrong")}} for r in rows]
    return markdown_table(shown, [Column(first, first_header), Column("correct", "correct [95% CI]"),
                                  Column("abstained", "abstained"), Column("wrong", "wrong")])


def row_of(rows: Sequence[Mapping[str, Any]], key: str, value: str) -> Mapping[str, Any]:
    return next(r for r in rows if r[key] == value)


def bench_line(cell: Mapping[str, Any]) -> str:
    """``grid: dataset=D llm=L n=N udcg=.. udcg_theta=.. ndcg=.. erag=.. diff_theta_vs_ndcg=X [lo, hi]
    wrong_oracle_utility=.. wrong_oracle_relevance=..`` (Spearman means; the oracle rows' wrong rates)."""
    corr, oracle = cell["correlation"], cell["oracle"]
    theta = row_of(corr, "metric", "udcg_theta")
    means = " ".join(f"{m}={fmt_float(row_of(corr, 'metric', m)['spearman'])}" for m in HEADLINE_METRICS)
    return (f"grid: dataset={cell['dataset']} llm={cell['llm']} n={theta['queries']} {means} "
            f"diff_theta_vs_ndcg={fmt_float(theta['spearman_diff_vs_ndcg'])} "
            f"[{fmt_float(theta['spearman_diff_lo'])}, {fmt_float(theta['spearman_diff_hi'])}] "
            f"wrong_oracle_utility={fmt_float(row_of(oracle, 'criterion', 'utility')['wrong'])} "
            f"wrong_oracle_relevance={fmt_float(row_of(oracle, 'criterion', 'relevance')['wrong'])}")


def cell_markdown(cell: Mapping[str, Any]) -> str:
    """The cell's report: sizes, correlation, oracle selection, distractor effect."""
    parts = [f"# Grid cell: {cell['dataset']} read by {cell['llm']}", "",
             f"{cell['questions']} questions, {cell['contexts']} graded contexts ({cell['outcomes']}); UDCG_theta and "
             f"gamma* fitted {cell['fit']}. The correlation rows are on the scored questions; the oracle and "
             "distractor rows, which fit nothing, on every question of the cell.", "",
             "## Correlation with the end-to-end outcome (per-query means)", "",
             correlation_markdown(cell["correlation"]), "", "## Oracle selection among the answered contexts", "",
             outcome_markdown(cell["oracle"], "criterion", "picked by"), "",
             "## Distractor effect (contexts holding a relevant passage)", ""]
    if cell["distractors"]:
        parts.append(outcome_markdown(cell["distractors"], "hard_distractors", "hard distractors"))
    else:
        parts.append("The pools allow no comparison (fewer than 20 contexts in every group).")
    return "\n".join(parts) + "\n"


def cell_figure(cell: Mapping[str, Any]):
    rows = cell["correlation"]
    return bars_figure([LABELS[r["metric"]] for r in rows], [r["spearman"] for r in rows],
                       lo=[r["spearman_lo"] for r in rows], hi=[r["spearman_hi"] for r in rows],
                       ylabel="per-query Spearman", highlight=["UDCG", "UDCG_theta"],
                       title=f"{cell['dataset']} read by {cell['llm']}: metric vs outcome ({cell['questions']} q)")


def grid_figure(cells: Sequence[Mapping[str, Any]]):
    """Grouped bars: the headline metrics' Spearman means with CIs, one group per cell."""
    fig, ax = new_figure(figsize=(8.0, 4.2))
    width = 0.8 / len(HEADLINE_METRICS)
    x = np.arange(len(cells))
    for i, metric in enumerate(HEADLINE_METRICS):
        rows = [row_of(c["correlation"], "metric", metric) for c in cells]
        v = np.array([r["spearman"] for r in rows])
        err = np.vstack([v - [r["spearman_lo"] for r in rows], [r["spearman_hi"] for r in rows] - v])
        ax.bar(x + (i - 1.5) * width, v, width, yerr=np.clip(err, 0, None), capsize=2, label=LABELS[metric])
    ax.set_xticks(x, [f"{c['dataset']}\n{c['llm'].replace('-instruct', '')}" for c in cells], fontsize=8)
    ax.set_ylabel("per-query Spearman with the outcome")
    ax.legend(fontsize=8, ncol=4)
    set_title(ax, "Which metric predicts the LLM's answer, by cell (95% CIs)")
    return fig


def summary_markdown(cells: Sequence[Mapping[str, Any]]) -> str:
    """The README's headline table: one row per cell."""
    shown = []
    for c in cells:
        corr, oracle = c["correlation"], c["oracle"]
        theta = row_of(corr, "metric", "udcg_theta")
        shown.append({"cell": f"{c['dataset']} x {c['llm'].replace('-instruct', '')}", "n": theta["queries"],
                      **{m: fmt_float(row_of(corr, "metric", m)["spearman"]) for m in HEADLINE_METRICS},
                      "diff": fmt_ci(theta["spearman_diff_vs_ndcg"], theta["spearman_diff_lo"],
                                     theta["spearman_diff_hi"]),
                      "wrong": f"{fmt_float(row_of(oracle, 'criterion', 'utility')['wrong'], 2)} / "
                               f"{fmt_float(row_of(oracle, 'criterion', 'relevance')['wrong'], 2)}"})
    return markdown_table(shown, [Column("cell", "cell"), Column("n", "queries"), Column("udcg", "UDCG"),
                                  Column("udcg_theta", "UDCG_theta"), Column("ndcg", "nDCG"), Column("erag", "eRAG"),
                                  Column("diff", "UDCG_theta - nDCG"),
                                  Column("wrong", "wrong: utility / relevance oracle")])


def agreement_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    shown = [{"dataset": r["dataset"], "passages": r["passages"], "rho": fmt_ci(r["spearman"], r["spearman_lo"],
                                                                               r["spearman_hi"]),
              "sign": f"{100 * r['sign_changed']:.1f}%", "cls": f"{100 * r['distractor_class_changed']:.1f}%",
              "hard": f"{100 * r['hard_a']:.0f}% / {100 * r['hard_b']:.0f}%"} for r in rows]
    return markdown_table(shown, [Column("dataset", "data set"), Column("passages", "passages"),
                                  Column("rho", "utility Spearman [95% CI]"), Column("sign", "sign changed"),
                                  Column("cls", "distractor class changed"),
                                  Column("hard", "hard distractors 0.5B / 1.5B")])
