"""The main job's comparison plots (PNG): metrics per system and end-to-end outcomes per system.

Bars carry their values; metric bars carry 95% bootstrap CIs over queries; titles name at least the number of queries.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from udcg_ltr.metrics.table import display_name
from udcg_ltr.report import fmt_float, new_figure, set_title
from udcg_ltr.stats.bootstrap import bootstrap_ci

OUTCOME_COLORS = {"correct": "#228833", "abstained": "#ccbb44", "wrong": "#ee6677"}
#: The main metrics of the systems plot (``{k}``: the context size), the ones a system has.
MAIN_METRICS = ("udcg@{k}", "udcg_theta@{k}", "ndcg@{k}", "precision@{k}")


def systems_figure(results: Sequence, k: int, metrics: Sequence[str] = MAIN_METRICS, *,
                   title: str | None = None, n_bootstrap: int = 1000, seed: int = 0):
    """Grouped bars: each system's mean of the main metrics (the ones it has), 95% bootstrap CI, value on top."""
    names = [m.format(k=k) for m in metrics]
    summaries = [r.summary() for r in results]
    names = [n for n in names if any(np.isfinite(s.get(n, np.nan)) for s in summaries)]
    fig, ax = new_figure(figsize=(max(6.4, 1.9 * len(results)), 4.4))
    width = 0.8 / max(len(names), 1)
    x = np.arange(len(results))
    top = 0.0
    for j, name in enumerate(names):
        means = np.array([s.get(name, np.nan) for s in summaries], dtype=np.float64)
        cis = np.array([bootstrap_ci(r.per_query[name], n_bootstrap=n_bootstrap, seed=seed) if name in r.per_query
                        else (np.nan, np.nan) for r in results], dtype=np.float64).reshape(len(results), 2)
        yerr = np.nan_to_num(np.clip(np.vstack([means - cis[:, 0], cis[:, 1] - means]), 0, None))
        xs = x + (j - (len(names) - 1) / 2) * width
        ax.bar(xs, means, width, label=display_name(name), color=f"C{j}", yerr=yerr, capsize=2, error_kw={"elinewidth": 0.8})
        for xi, m, hi in zip(xs, means, cis[:, 1]):
            end = hi if np.isfinite(hi) else m
            if np.isfinite(m):
                ax.text(xi, (end if m >= 0 else min(m, 0.0)) + 0.01, fmt_float(m), ha="center", va="bottom",
                        rotation=90, fontsize=6.5)
                top = max(top, end)
    ax.set(ylim=(None, max(top * 1.18, 0.1) if top > 0 else None), ylabel="mean over queries (95% bootstrap CI)")
    ax.set_xticks(x, [r.name for r in results], rotation=15, fontsize=8)
    n = max((len(v) for r in results for v in r.per_query.values()), default=0)
    set_title(ax, title or f"systems on the evaluation split: {n} queries")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return fig


def outcomes_figure(results: Sequence, *, title: str | None = None):
    """Stacked bars: share of correct / abstained / wrong end-to-end answers per system, each segment labelled."""
    fig, ax = new_figure(figsize=(max(6.4, 1.6 * len(results)), 4.4))
    x = np.arange(len(results))
    bottom = np.zeros(len(results))
    for outcome, color in OUTCOME_COLORS.items():
        share = np.array([r.summary().get(f"{outcome}_rate", np.nan) for r in results])
        ax.bar(x, share, bottom=bottom, color=color, label=outcome)
        for xi, b, sh in zip(x, bottom, share):
            if np.isfinite(sh) and sh > 0:
                ax.text(xi, b + sh / 2, f"{100 * sh:.1f}%", ha="center", va="center", fontsize=7)
        bottom += np.nan_to_num(share)
    ax.set_xticks(x, [r.name for r in results], rotation=15, fontsize=8)
    ax.set(ylim=(0, 1), ylabel="share of queries")
    n = max((len(r.outcomes) for r in results if r.outcomes is not None), default=0)
    set_title(ax, title or f"end-to-end answers of the LLM: {n} queries")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return fig
