"""The main job's comparison plots (PNG): metrics per system and end-to-end outcomes per system."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from udcg_ltr.analysis.report import new_figure, save_figure

OUTCOME_COLORS = {"correct": "#228833", "abstained": "#ccbb44", "wrong": "#ee6677"}


def plot_systems(results: Sequence, k: int, path: str | os.PathLike,
                 metrics: Sequence[str] = ("UDCG@{k}", "UDCG_theta@{k}", "nDCG@{k}", "P@{k}")) -> Path:
    """Grouped bars: each system's mean of the main metrics (the ones it has)."""
    names = [m.format(k=k) for m in metrics]
    summaries = [r.summary() for r in results]
    names = [n for n in names if any(np.isfinite(s.get(n, np.nan)) for s in summaries)]
    fig, ax = new_figure(figsize=(max(6.0, 1.6 * len(results)), 4.0))
    width = 0.8 / max(len(names), 1)
    x = np.arange(len(results))
    for j, name in enumerate(names):
        ax.bar(x + (j - (len(names) - 1) / 2) * width, [s.get(name, np.nan) for s in summaries], width, label=name)
    ax.set_xticks(x)
    ax.set_xticklabels([r.name for r in results], rotation=15, fontsize=8)
    ax.set_ylabel("mean over queries")
    ax.set_title("systems on the evaluation split")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def plot_outcomes(results: Sequence, path: str | os.PathLike) -> Path:
    """Stacked bars: share of correct / abstained / wrong end-to-end answers per system."""
    fig, ax = new_figure(figsize=(max(6.0, 1.4 * len(results)), 4.0))
    x = np.arange(len(results))
    bottom = np.zeros(len(results))
    for outcome, color in OUTCOME_COLORS.items():
        share = np.array([r.summary().get(f"{outcome}_rate", np.nan) for r in results])
        ax.bar(x, share, bottom=bottom, color=color, label=outcome)
        bottom += np.nan_to_num(share)
    ax.set_xticks(x)
    ax.set_xticklabels([r.name for r in results], rotation=15, fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of queries")
    ax.set_title("end-to-end answers of the LLM")
    ax.legend(fontsize=8, loc="upper right")
    return save_figure(fig, path)
