"""Evaluating dynamic-k selectors: UDCG of the kept set, the distribution of k, and end to end with an LLM.

:func:`evaluate_selectors` rows: ``udcg`` (mean UDCG, Eq. 4, of the kept set, 0.5 for ``k_q = 0``) and its standard
error, ``mean_k``, ``k0_rate``, ``k_hist`` (counts of ``k = 0..K``); with an LLM scorer, the rates and costs of
:func:`udcg_ltr.annotate.end_to_end.end_to_end_selection` (``k_q = 0``: abstained, no prompt). :func:`dynamic_k_report`
is an *analysis* (it reads gold labels): the dynamic-k analysis of :mod:`udcg_ltr.metrics.distractor` for rankings of
the same queries, on ``"heuristic"`` utilities (gold labels with the ranking's **own** scores, shift-invariant
``"range"`` rule: logits can be negative) or the ``"llm"`` ones of Eq. 2, plus ``udcg_at_best_k`` (Eq. 4 of each query's
top-``best_k`` set); its labels-free counterpart is :class:`udcg_ltr.select.baselines.CumulativeUtilityRule`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.annotate.end_to_end import end_to_end_selection
from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.metrics import distractor as D
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.report import Column, fmt_float, markdown_table, new_figure, row_keys, save_figure
from udcg_ltr.select.base import RankedSlates, Selector, rank_slates, udcg_of_kept
from udcg_ltr.select.training import rank_split, required_extra


def kept_pids(ranked: RankedSlates, pids: np.ndarray, k) -> list[list[str]]:
    """Passage ids of each query's kept prefix, in rank order (``pids``: the slates' ``[Q, W]`` id array)."""
    if ranked.order is None:
        raise ValueError("ranked slates carry no column order")
    ranked_pids = np.take_along_axis(np.asarray(pids, dtype=object), ranked.order, axis=1)
    return [[str(p) for p in ranked_pids[i, :int(kq)]] for i, kq in enumerate(np.asarray(k))]


@dataclass(frozen=True)
class EndToEnd:
    """End to end for :func:`evaluate_selectors`: an LLM ``scorer`` answers each query's kept passages, graded
    against the ``records`` (aligned with the slates' rows: questions, passages, gold answers) as
    :func:`udcg_ltr.annotate.end_to_end.end_to_end_selection` does (``relevance_threshold``, ``match_rule``,
    ``tokenizer`` counting prompt tokens)."""

    records: Sequence[QueryRecord] | None
    scorer: Any
    tokenizer: Any = None
    relevance_threshold: int = 1
    match_rule: str = "contains"

    def __post_init__(self) -> None:
        if self.records is None:
            raise ValueError("end to end needs the records (questions, passages, gold answers): records=None")


def evaluate_selectors(selectors: Mapping[str, Selector], scores, slates, *, gamma: float = DEFAULT_GAMMA,
                       end_to_end: EndToEnd | None = None, split: str = "test",
                       plot_path: str | os.PathLike | None = None, title: str | None = None,
                       ks: Mapping[str, np.ndarray] | None = None,
                       per_query: Mapping[str, np.ndarray] | None = None) -> list[dict[str, Any]]:
    """One row per selector on ``(scores, slates)`` (module doc); ``end_to_end`` adds the LLM's answers,
    ``plot_path`` the k histograms; ``ks`` receives each chosen k array and ``per_query`` each selector's UDCG
    per row (for paired bootstrap tests)."""
    extra = sorted({name for sel in selectors.values() for name in required_extra(sel)})
    ranked = rank_split(scores, slates, extra_fields=extra)
    if ranked.utility is None:
        raise ValueError("evaluating selectors needs the gold utilities of the slates")
    if end_to_end is not None and len(end_to_end.records) != len(ranked):
        raise ValueError(f"{len(end_to_end.records)} records but {len(ranked)} slate rows")
    rows, chosen = [], {}
    for name, sel in selectors.items():
        k = chosen[name] = sel.select(ranked)
        values = udcg_of_kept(ranked.utility, ranked.mask, k, gamma=gamma)
        hist = np.bincount(k, minlength=ranked.width + 1)
        row: dict[str, Any] = {
            "selector": name, "kind": sel.kind, "split": split, "n": len(ranked), "udcg": float(values.mean()),
            "udcg_se": float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan"),
            "mean_k": float(k.mean()), "k0_rate": float((k == 0).mean()),
            "k_hist": " ".join(str(int(c)) for c in hist), "uses_labels": bool(sel.needs_labels)}
        if end_to_end is not None:
            e = end_to_end
            row.update(end_to_end_selection(e.records, kept_pids(ranked, slates.pids, k), e.scorer,
                                            relevance_threshold=e.relevance_threshold, match_rule=e.match_rule,
                                            tokenizer=e.tokenizer))
        rows.append(row)
        if isinstance(per_query, dict):
            per_query[name] = values
    if isinstance(ks, dict):
        ks.update(chosen)
    if plot_path is not None:
        plot_k_histograms(chosen, plot_path, max_k=ranked.width, title=title)
    return rows


def plot_k_histograms(ks: Mapping[str, np.ndarray], path: str | os.PathLike, *, max_k: int | None = None,
                      title: str | None = None) -> Path:
    """A PNG grid: one bar chart of the chosen k (``0..max_k``, share of queries) per selector; atomic."""
    names = list(ks)
    if not names:
        raise ValueError("no selector to plot")
    top = max_k if max_k is not None else int(max(int(np.max(v, initial=0)) for v in ks.values()))
    cols = min(4, len(names))
    rows = int(np.ceil(len(names) / cols))
    fig, axes = new_figure(rows, cols, figsize=(3.2 * cols, 2.5 * rows))
    axes = np.atleast_1d(axes)
    for i, (ax, name) in enumerate(zip(axes, names)):
        k = np.asarray(ks[name], dtype=np.int64)
        ax.bar(np.arange(top + 1), np.bincount(k, minlength=top + 1)[:top + 1] / max(len(k), 1), color="#4477aa")
        ax.set_title(f"{name} (mean k {k.mean():.2f})", fontsize=9)
        ax.set_xticks(np.arange(top + 1))
        ax.set_xlabel("k (passages kept)", fontsize=8)
        ax.tick_params(labelsize=7)
        if i:
            ax.sharey(axes[0])
    for ax in axes[len(names):]:
        ax.axis("off")
    axes[0].set_ylabel("share of queries", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return save_figure(fig, path, dpi=110)


DEFAULT_COLUMNS = ("selector", "split", "n", "udcg", "udcg_se", "mean_k", "k0_rate", "k_hist")


def format_rows_markdown(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None, *,
                         digits: int = 4) -> str:
    """Rows as a Markdown table (floats to ``digits`` decimals, NaN as NA; missing cells empty)."""
    if not rows:
        return ""
    if columns is None:
        columns = [c for c in DEFAULT_COLUMNS if any(c in r for r in rows)]
        columns += [c for c in row_keys(rows) if c not in (*columns, "kind", "uses_labels")]

    def fmt(v: Any) -> str:
        return fmt_float(v, digits) if isinstance(v, float) else ("" if v is None else str(v))

    numeric = [isinstance(next((r[c] for r in rows if c in r), ""), (int, float)) for c in columns]
    return markdown_table(rows, [Column(c, fmt=fmt) for c in columns],
                          align="".join("r" if n else "l" for n in numeric)).rstrip("\n")


#: Rule 3 on the ranking's own scores, shift invariant (reranker logits can be negative).
RANGE_HEURISTIC = D.HeuristicConfig(score_rule="range")
DEFAULT_THRESHOLDS = D.AssessmentThresholds()


def dynamic_k_report(rankings: Mapping[str, tuple[Any, Any]], *, k: int | None = None, harm_weight: float = 1.0,
                     min_k: int = 1, sources: tuple[str, ...] = ("heuristic", "llm"), gamma: float = DEFAULT_GAMMA,
                     heuristic: D.HeuristicConfig = RANGE_HEURISTIC,
                     thresholds: D.AssessmentThresholds = DEFAULT_THRESHOLDS) -> list[dict[str, Any]]:
    """Rows (one per ranking x utility source) of the analysis measures (module doc); ``rankings`` maps a name
    to ``(scores, slates)``, ``[Q, W]`` scores aligned with the slates' columns (utilities for ``"llm"``)."""
    rows = []
    for name, (scores, slates) in rankings.items():
        extra = {"relevant": np.asarray(slates.relevant, dtype=np.float64),
                 "is_distractor": np.asarray(slates.is_distractor, dtype=np.float64)}
        ranked = rank_slates(scores, slates, extra=extra)
        m = ranked.mask
        for source in sources:
            if source == "heuristic":
                u = D.heuristic_utilities(ranked.extra["relevant"], ranked.scores, m,
                                          is_distractor=ranked.extra["is_distractor"] > 0, config=heuristic)
            elif source == "llm":
                if ranked.utility is None:
                    raise ValueError(f"ranking {name!r}: the 'llm' source needs annotated utilities")
                u = ranked.utility
            else:
                raise ValueError(f"unknown utility source {source!r} (use 'heuristic' or 'llm')")
            a = D.distractor_analysis(u, m, k=k, discount="log2", dynamic_discount=None,
                                      harm_weight=harm_weight, min_k=min_k, thresholds=thresholds)
            hist = " ".join(str(int(c)) for c in np.bincount(a.best_k, minlength=ranked.width + 1))
            at_k = np.nan if ranked.utility is None else udcg_of_kept(ranked.utility, m, a.best_k, gamma=gamma)
            rate = a.distractor_rate[np.isfinite(a.distractor_rate)]
            rows.append({
                "ranking": name, "utilities": source, "n": len(ranked), "cutoff": "all" if k is None else k,
                "best_k_mean": float(a.best_k.mean()), "best_k_median": float(np.median(a.best_k)),
                "best_k_hist": hist, "udcg_at_best_k": float(np.mean(at_k)), "dcg": float(a.dcg.mean()),
                "dcg_without_distractors": float(a.dcg_without_distractors.mean()),
                "harm": float(a.distractor_harm.mean()),
                "distractor_rate": float(rate.mean()) if rate.size else float("nan"),
                "harm_share": float(a.harm_share.mean()),
                **{c.lower(): float((a.assessment == c).mean()) for c in (D.SAFE, D.RISKY, D.DANGEROUS)}})
    return rows
