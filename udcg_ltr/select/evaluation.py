"""Evaluating dynamic-k selectors: UDCG of the kept set, the distribution of k, and end to end with an LLM.

:func:`evaluate_selectors` returns one row per selector (a dict, ready for
:func:`format_rows_markdown` / :func:`write_rows_csv`):

* ``udcg``: mean over queries of UDCG (Eq. 4) of the kept set top-``k_q`` (0.5 for ``k_q = 0``),
  with its standard error ``udcg_se``;
* ``mean_k``, ``k0_rate`` (share of "give no passage") and ``k_hist`` (counts of ``k = 0..K``),
  also drawn as a PNG grid of bar charts by :func:`plot_k_histograms`;
* with an LLM scorer (any object with ``.score(items, generate=True)`` returning results with
  ``.answer`` and ``.n_prompt_tokens``, as :class:`udcg_ltr.annotate.scorer.LLMScorer`), the LLM
  answers each kept context (passages in rank order) through
  :func:`udcg_ltr.annotate.end_to_end.end_to_end_selection`, graded ``correct_rate``,
  ``abstained_rate``, ``wrong_rate``; plus the cost: ``mean_passages``, ``mean_prompt_tokens``
  (the scorer's prompt lengths) and ``mean_context_tokens`` (the kept passages' tokens with the
  scorer's tokenizer, or words when it has none). ``k_q = 0`` is not sent to the LLM: it counts as
  abstained with a 0-token prompt.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.annotate.end_to_end import end_to_end_selection
from udcg_ltr.data.schema import QueryRecord
from udcg_ltr.io import atomic_write_bytes
from udcg_ltr.metrics.udcg import DEFAULT_GAMMA
from udcg_ltr.report import Column, markdown_table, write_csv
from udcg_ltr.select.base import RankedSlates, Selector, udcg_of_kept
from udcg_ltr.select.training import rank_split, required_extra


def kept_pids(ranked: RankedSlates, pids: np.ndarray, k) -> list[list[str]]:
    """Passage ids of each query's kept prefix, in rank order (``pids``: the slates' ``[Q, W]`` id array)."""
    if ranked.order is None:
        raise ValueError("ranked slates carry no column order")
    ranked_pids = np.take_along_axis(np.asarray(pids, dtype=object), ranked.order, axis=1)
    return [[str(p) for p in ranked_pids[i, :int(kq)]] for i, kq in enumerate(np.asarray(k))]


def evaluate_selectors(selectors: Mapping[str, Selector], scores, slates, *, gamma: float = DEFAULT_GAMMA,
                       records: Sequence[QueryRecord] | None = None, scorer: Any = None, tokenizer: Any = None,
                       split: str = "test", plot_path: str | os.PathLike | None = None, title: str | None = None,
                       relevance_threshold: int = 1, match_rule: str = "contains",
                       ks: Mapping[str, np.ndarray] | None = None) -> list[dict[str, Any]]:
    """One row per selector on ``(scores, slates)`` (module doc); ``records`` + ``scorer`` add end to end.

    ``scores`` are aligned with the columns of ``slates`` (a :class:`~udcg_ltr.data.padded.PaddedSlates`
    with utilities). ``records`` must be aligned with the slates' rows (same order). With
    ``plot_path`` the k histograms are written as a PNG. ``ks`` (optional) receives each selector's
    chosen k array, keyed by name.
    """
    extra = sorted({name for sel in selectors.values() for name in required_extra(sel)})
    ranked = rank_split(scores, slates, extra_fields=extra)
    if ranked.utility is None:
        raise ValueError("evaluating selectors needs the gold utilities of the slates")
    if records is not None and len(records) != len(ranked):
        raise ValueError(f"{len(records)} records but {len(ranked)} slate rows")
    width = ranked.width
    rows, chosen = [], {}
    for name, sel in selectors.items():
        k = sel.select(ranked)
        chosen[name] = k
        per_query = udcg_of_kept(ranked.utility, ranked.mask, k, gamma=gamma)
        hist = np.bincount(k, minlength=width + 1)
        row: dict[str, Any] = {
            "selector": name, "kind": sel.kind, "split": split, "n": len(ranked),
            "udcg": float(per_query.mean()),
            "udcg_se": float(per_query.std(ddof=1) / np.sqrt(len(per_query))) if len(per_query) > 1 else float("nan"),
            "mean_k": float(k.mean()), "k0_rate": float((k == 0).mean()),
            "k_hist": " ".join(str(int(c)) for c in hist),
            "uses_labels": bool(sel.needs_labels),
        }
        if scorer is not None:
            if records is None:
                raise ValueError("end to end needs the records (questions, passages, gold answers)")
            contexts = kept_pids(ranked, slates.pids, k)
            row.update(end_to_end_selection(records, contexts, scorer, relevance_threshold=relevance_threshold,
                                            match_rule=match_rule, tokenizer=tokenizer))
        rows.append(row)
    if ks is not None and isinstance(ks, dict):
        ks.update(chosen)
    if plot_path is not None:
        plot_k_histograms(chosen, plot_path, max_k=width, title=title)
    return rows


def plot_k_histograms(ks: Mapping[str, np.ndarray], path: str | os.PathLike, *, max_k: int | None = None,
                      title: str | None = None) -> Path:
    """A PNG grid: one bar chart of the chosen k (``0..max_k``, share of queries) per selector; atomic."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(ks)
    if not names:
        raise ValueError("no selector to plot")
    top = max_k if max_k is not None else int(max(int(np.max(v, initial=0)) for v in ks.values()))
    cols = min(4, len(names))
    rows = int(np.ceil(len(names) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.5 * rows), squeeze=False, sharey=True)
    for ax, name in zip(axes.flat, names):
        k = np.asarray(ks[name], dtype=np.int64)
        share = np.bincount(k, minlength=top + 1)[:top + 1] / max(len(k), 1)
        ax.bar(np.arange(top + 1), share, color="#4477aa")
        ax.set_title(f"{name} (mean k {k.mean():.2f})", fontsize=9)
        ax.set_xticks(np.arange(top + 1))
        ax.set_xlabel("k (passages kept)", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    axes[0, 0].set_ylabel("share of queries", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return Path(path)


DEFAULT_COLUMNS = ("selector", "split", "n", "udcg", "udcg_se", "mean_k", "k0_rate", "k_hist")


def format_rows_markdown(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None, *,
                         digits: int = 4) -> str:
    """Rows as a Markdown table (floats to ``digits`` decimals, NaN as NA; missing cells empty)."""
    if not rows:
        return ""
    if columns is None:
        columns = [c for c in DEFAULT_COLUMNS if any(c in r for r in rows)]
        columns += [c for r in rows for c in r if c not in columns and c not in ("kind", "uses_labels", "outcomes")]
        columns = list(dict.fromkeys(columns))

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return "NA" if np.isnan(v) else f"{v:.{digits}f}"
        return "" if v is None else str(v)

    numeric = [isinstance(next((r[c] for r in rows if c in r), ""), (int, float)) for c in columns]
    return markdown_table(rows, [Column(c, fmt=fmt) for c in columns],
                          align="".join("r" if n else "l" for n in numeric)).rstrip("\n")


def write_rows_csv(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike,
                   columns: Sequence[str] | None = None) -> Path:
    """Rows as CSV (atomic write); columns default to the union of the rows' keys in first-seen order."""
    if columns is None:
        columns = list(dict.fromkeys(c for r in rows for c in r if c != "outcomes"))
    return write_csv(path, rows, columns)


__all__ = ["end_to_end_selection", "evaluate_selectors", "format_rows_markdown", "kept_pids", "plot_k_histograms",
           "write_rows_csv"]
