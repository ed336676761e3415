"""Calibrating gamma of the training-free UDCG (Eq. 4): how much a distractor hurts relative to how much a
useful passage helps (paper: 1/3). The calibrated gamma of a grid maximises the per-query Spearman of UDCG
with the outcome order (correct > abstained > wrong), averaged over the queries where it is defined (ties
within ``1e-12``: the gamma closest to 1/3, then the smaller). Only the order matters: the logit is used.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from udcg_ltr.metrics.udcg import DEFAULT_GAMMA, udcg_logit
from udcg_ltr.report import new_figure, save_figure
from udcg_ltr.stats.correlation import per_query_correlations
from udcg_ltr.stats.groups import group_index

#: 0, 1/12, ..., 2 in steps of 1/12 (4/12 is exactly the double nearest 1/3, the paper's gamma), and 3.
DEFAULT_GAMMA_GRID: tuple[float, ...] = tuple(sorted({i / 12 for i in range(25)} | {DEFAULT_GAMMA, 3.0}))


@dataclass
class GammaCalibration:
    gamma: float
    grid: np.ndarray
    mean_spearman: np.ndarray  # per grid point (NaN when no query is defined)
    n_defined: np.ndarray  # defined queries per grid point
    n_queries: int
    meta: dict = field(default_factory=dict)

    @property
    def best_score(self) -> float:
        return float(self.mean_spearman[np.argmin(np.abs(self.grid - self.gamma))])

    def rows(self) -> list[dict]:
        return [{"gamma": float(g), "mean_spearman": float(s), "n_defined": int(n)}
                for g, s, n in zip(self.grid, self.mean_spearman, self.n_defined)]

    def to_dict(self) -> dict:
        return {"gamma": self.gamma, "best_mean_spearman": self.best_score, "n_queries": self.n_queries,
                "grid": self.rows(), "meta": self.meta}


def calibrate_gamma(utility: np.ndarray, mask: np.ndarray | None, outcome: np.ndarray, qids: Sequence, *,
                    grid: Sequence[float] = DEFAULT_GAMMA_GRID, default: float = DEFAULT_GAMMA) -> GammaCalibration:
    """Grid search of gamma maximising the mean per-query Spearman of UDCG against outcomes (module docstring)."""
    grid_arr = np.asarray(sorted(set(float(g) for g in grid)), dtype=np.float64)
    if grid_arr.size == 0:
        raise ValueError("empty gamma grid")
    gi = group_index(qids)
    means = np.full(grid_arr.size, np.nan)
    ndef = np.zeros(grid_arr.size, dtype=np.int64)
    for i, g in enumerate(grid_arr):
        corr = per_query_correlations(qids, udcg_logit(utility, mask, gamma=g), outcome, groups_idx=gi).spearman
        ok = ~np.isnan(corr)
        ndef[i] = int(ok.sum())
        means[i] = float(corr[ok].mean()) if ok.any() else np.nan
    cands = grid_arr[means >= np.nanmax(means) - 1e-12] if np.isfinite(means).any() else np.array([default])
    best = float(cands[np.lexsort((cands, np.abs(cands - default)))][0])
    return GammaCalibration(gamma=best, grid=grid_arr, mean_spearman=means, n_defined=ndef,
                            n_queries=len(gi[0]), meta={"default": default})


def plot_gamma_curve(cal: GammaCalibration, path: str | os.PathLike, *, title: str | None = None) -> Path:
    """PNG: mean per-query Spearman against gamma, with the calibrated and the default gamma marked."""
    fig, ax = new_figure()
    ax.plot(cal.grid, cal.mean_spearman, "-o", ms=3)
    ax.axvline(cal.gamma, color="tab:orange", ls="--", label=f"calibrated gamma = {cal.gamma:.3g}")
    ax.axvline(cal.meta.get("default", DEFAULT_GAMMA), color="grey", ls=":", label="paper gamma = 1/3")
    ax.set(xlabel="gamma", ylabel="mean per-query Spearman (calibration split)",
           title=title or f"gamma calibration ({cal.n_queries} queries)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)
