"""Report helpers for every study and job: tables (markdown + CSV), figures (PNG), number formats. A leaf.

A table is a list of row dicts plus an ordered list of :class:`Column` s (key, header, formatter); a figure is saved
atomically (the ``*_figure`` functions return it unsaved: tests read its artists). Number formats turn NaN into ``NA``.
"""

from __future__ import annotations

import csv
import math
import os
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from udcg_ltr.io import atomic_open, atomic_write_text


def _isnan(x) -> bool:
    try:
        return x is None or math.isnan(float(x))
    except (TypeError, ValueError):
        return False


def fmt_float(x, digits: int = 3) -> str:
    """``0.123``; NaN / None -> ``NA``."""
    return "NA" if _isnan(x) else f"{float(x):.{digits}f}"


def fmt_ci(value, lo, hi, digits: int = 3) -> str:
    """``0.412 [0.350, 0.470]``; NA parts stay NA."""
    return "NA" if _isnan(value) else f"{fmt_float(value, digits)} [{fmt_float(lo, digits)}, {fmt_float(hi, digits)}]"


def fmt_pct(x, digits: int = 1) -> str:
    """A rate as percentage points (``41.3``); NA for NaN."""
    return "NA" if _isnan(x) else f"{100.0 * float(x):.{digits}f}"


def fmt_pct_ci(v, lo, hi, digits: int = 1) -> str:
    """``41.3 [35.0, 47.2]`` in percentage points."""
    return "NA" if _isnan(v) else f"{fmt_pct(v, digits)} [{fmt_pct(lo, digits)}, {fmt_pct(hi, digits)}]"


def fmt_p(p, digits: int = 3) -> str:
    """p-values: ``<0.001`` below the resolution, ``NA`` when undefined, ``-`` for the reference row."""
    if p is None:
        return "-"
    if _isnan(p):
        return "NA"
    floor = 10.0 ** -digits
    return f"<{floor:.{digits}f}" if p < floor else f"{p:.{digits}f}"


@dataclass(frozen=True)
class Column:
    """A table column: the row-dict ``key``, its ``header`` and an optional ``fmt`` for markdown."""

    key: str
    header: str | None = None
    fmt: Callable[[Any], str] | None = None

    def render(self, row: Mapping[str, Any]) -> str:
        value = row.get(self.key)
        if self.fmt is not None:
            return self.fmt(value)
        if isinstance(value, float):
            return fmt_float(value)
        return "" if value is None else str(value)


def row_keys(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every key of the row dicts, in order of first appearance (a table's default columns)."""
    return list(dict.fromkeys(k for row in rows for k in row))


def _columns(rows: Sequence[Mapping[str, Any]], columns) -> list[Column]:
    columns = row_keys(rows) if columns is None else columns
    return [c if isinstance(c, Column) else Column(c) for c in columns]


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column | str] | None = None, *,
                   align: str | None = None) -> str:
    """A GitHub-flavoured markdown table. ``align``: one char per column (``l``, ``r``, ``c``); default: first left, rest right."""
    cols = _columns(rows, columns)
    align = align or ("l" + "r" * (len(cols) - 1))
    marks = {"l": ":--", "r": "--:", "c": ":-:"}
    esc = lambda s: s.replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(esc(c.header or c.key) for c in cols) + " |",
             "| " + " | ".join(marks.get(a, "---") for a in align) + " |"]
    lines += ["| " + " | ".join(esc(c.render(row)) for c in cols) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def table_cell(v):
    """A table cell as a plain value: numpy numbers as Python numbers, sequences joined by spaces, NaN as None."""
    if isinstance(v, (np.floating, np.integer)):
        v = v.item()
    if isinstance(v, (list, tuple)):
        return " ".join(str(x) for x in v)
    return None if isinstance(v, float) and math.isnan(v) else v


def table_data(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """``(columns, data)`` of row dicts: every key (:func:`row_keys`) and each row's :func:`table_cell` s."""
    cols = row_keys(rows)
    return cols, [[table_cell(row.get(c)) for c in cols] for row in rows]


def write_csv(path: str | os.PathLike, rows: Sequence[Mapping[str, Any]], columns: Sequence[Column | str] | None = None) -> Path:
    """Raw (unformatted) values, one row per dict; NaN / None as empty cells. Atomic."""
    cols = _columns(rows, columns)
    path = Path(path)
    with atomic_open(path, "w") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow([c.key for c in cols])
        writer.writerows([table_cell(row.get(c.key)) for c in cols] for row in rows)  # None: an empty cell
    return path


def read_csv(path: str | os.PathLike) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def write_table(stem: str | os.PathLike, rows: Sequence[Mapping[str, Any]], columns: Sequence[Column | str] | None = None,
                *, title: str | None = None, note: str | None = None, csv_columns: Sequence[Column | str] | None = None
                ) -> dict[str, Path]:
    """``{stem}.md`` (formatted, with optional title and note) and ``{stem}.csv`` (raw values). Returns both paths."""
    stem = Path(stem)
    md = (f"### {title}\n\n" if title else "") + markdown_table(rows, columns) + (f"\n{note}\n" if note else "")
    md_path = stem.with_suffix(".md")
    atomic_write_text(md_path, md)
    csv_path = write_csv(stem.with_suffix(".csv"), rows, csv_columns if csv_columns is not None else columns)
    return {"md": md_path, "csv": csv_path}


def new_figure(nrows: int = 1, ncols: int = 1, figsize=(6.4, 4.4)):
    """A figure on the non-interactive Agg backend (no display needed); returns ``(fig, axes)`` (axes flattened)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    return fig, (axes if len(axes) > 1 else axes[0])


def save_figure(fig, path: str | os.PathLike, *, dpi: int = 120) -> Path:
    """Render to PNG, written atomically."""
    path = Path(path)
    with atomic_open(path, "wb") as f:
        fig.savefig(f, format="png", dpi=dpi)
    return path


def set_title(ax, title: str | None, *, width: int = 72, fontsize: float = 10) -> None:
    """``ax``'s title, each of its lines wrapped at ``width`` characters (a long line would be cut at the figure's edge)."""
    if title:
        ax.set_title("\n".join(textwrap.fill(line, width) for line in str(title).split("\n")), fontsize=fontsize)


#: Line styles for many series on one axis: colour, marker and dash pattern all change from one series to the
#: next, so no two series look alike even in greyscale (12 series before a (marker, dash) pair repeats).
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "h", "p")
DASHES = ("-", "--", "-.", ":")


def series_style(i: int) -> dict[str, Any]:
    """Colour, marker and linestyle of the ``i``-th series (see :data:`MARKERS`)."""
    return {"color": f"C{i % 10}", "marker": MARKERS[i % len(MARKERS)], "linestyle": DASHES[i % len(DASHES)]}


def _as_series(s) -> dict[str, np.ndarray | None]:
    """A series as ``{"y", "lo", "hi"}`` float arrays (``lo`` / ``hi`` None without a CI)."""
    s = s if isinstance(s, Mapping) else {"y": s}
    return {key: None if s.get(key) is None else np.asarray(s[key], dtype=np.float64) for key in ("y", "lo", "hi")}


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=0.0, atol=1e-12, equal_nan=True))


def merge_identical(series: Mapping[str, Any]) -> dict[str, dict[str, np.ndarray | None]]:
    """Series with identical values (and CIs) merged into one, labelled ``"A = B"``: drawn separately, one
    would hide the other exactly (MRR and MAP with one relevant passage, nDCG and MRR correlations ...)."""
    merged: dict[str, dict[str, np.ndarray | None]] = {}
    for name, raw in series.items():
        s = _as_series(raw)
        for label, m in list(merged.items()):
            if all(_same(s[key], m[key]) for key in ("y", "lo", "hi")):
                merged[f"{label} = {name}"] = merged.pop(label)
                break
        else:
            merged[name] = s
    return merged


def draw_lines(ax, x: Sequence, series: Mapping[str, Any], *, dodge: float = 0.25) -> list:
    """Draw ``series`` (``y`` or ``{"y", "lo", "hi"}``: CI error bars) on ``ax`` so that none hides another;
    returns the lines. Identical series are merged (:func:`merge_identical`), each gets its own style
    (:func:`series_style`), and they are shifted sideways by up to ``dodge`` of the x spacing in all."""
    x = np.asarray(x, dtype=np.float64)
    merged = merge_identical(series)
    steps = np.diff(np.unique(x[np.isfinite(x)]))
    spacing = float(steps.min()) if len(steps) else 1.0
    n = len(merged)
    lines = []
    for j, (name, s) in enumerate(merged.items()):
        shift = (j - (n - 1) / 2) * (dodge * spacing / max(n - 1, 1)) if n > 1 else 0.0
        style = series_style(j)
        line, = ax.plot(x + shift, s["y"], ms=4, lw=1.4, label=name, **style)
        if s["lo"] is not None and s["hi"] is not None:
            yerr = np.vstack([np.clip(s["y"] - s["lo"], 0, None), np.clip(s["hi"] - s["y"], 0, None)])
            ax.errorbar(x + shift, s["y"], yerr=np.nan_to_num(yerr), fmt="none", ecolor=style["color"], elinewidth=0.8,
                        capsize=2, alpha=0.7)
        lines.append(line)
    return lines


def lines_figure(x: Sequence, series: Mapping[str, Mapping[str, Sequence] | Sequence], *, xlabel: str = "",
                 ylabel: str = "", title: str | None = None, xticks: Sequence | None = None):
    """The figure of :func:`plot_lines` (returned, not saved: tests read its artists)."""
    fig, ax = new_figure(figsize=(7.6, 4.4))
    draw_lines(ax, x, series)
    ax.axhline(0.0, color="grey", lw=0.5)
    ax.set(xlabel=xlabel, ylabel=ylabel, xticks=list(xticks) if xticks is not None else list(np.asarray(x)))
    set_title(ax, title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # outside: hides no point
    return fig


def plot_lines(x: Sequence, series: Mapping[str, Mapping[str, Sequence] | Sequence], path: str | os.PathLike,
               **kwargs) -> Path:
    """:func:`lines_figure` saved as a PNG (a series: ``y`` or ``{"y", "lo", "hi"}``; NaN gaps allowed)."""
    return save_figure(lines_figure(x, series, **kwargs), path)


def bars_figure(labels: Sequence[str], values: Sequence[float], *, lo=None, hi=None, ylabel: str = "",
                title: str | None = None, highlight: Sequence[str] = (), digits: int = 3):
    """The figure of :func:`plot_bars`: horizontal bars, CI error bars, each bar labelled with its value and CI."""
    fig, ax = new_figure(figsize=(7.2, 0.38 * len(labels) + 1.4))
    v = np.asarray(values, dtype=np.float64)
    y = np.arange(len(labels))[::-1]
    colors = ["tab:orange" if lab in set(highlight) else "tab:blue" for lab in labels]
    ok = ~np.isnan(v)
    lo_, hi_ = (np.asarray(b, float) if b is not None else np.full(len(v), np.nan) for b in (lo, hi))
    xerr = (np.nan_to_num(np.clip(np.vstack([v - lo_, hi_ - v]), 0, None))[:, ok]
            if lo is not None and hi is not None else None)
    ax.barh(y[ok], v[ok], color=[c for c, o in zip(colors, ok) if o], xerr=xerr, capsize=3)
    # Each bar's label sits beyond its whisker, on the side the bar points to: never on top of another bar.
    ends = np.where(np.isfinite(hi_), np.fmax(v, hi_), v)
    starts = np.where(np.isfinite(lo_), np.fmin(v, lo_), v)
    finite = np.concatenate([ends[ok], starts[ok], [0.0]])
    span = float(finite.max() - finite.min()) or 1.0
    pad = 0.015 * span
    for yi, vi, a, b, li, hi_i in zip(y, v, starts, ends, lo_, hi_):
        text = fmt_float(vi, digits) if _isnan(li) or _isnan(hi_i) else fmt_ci(vi, li, hi_i, digits)
        x, ha = (pad, "left") if np.isnan(vi) else (a - pad, "right") if vi < 0 else (b + pad, "left")
        ax.text(x, yi, text, va="center", ha=ha, fontsize=7, color="grey" if np.isnan(vi) else None)
    # room for the labels: about 40% of the data span on each side that has bars
    left = min(0.0, float(finite.min())) - (0.45 * span if (v[ok] < 0).any() else 0.02 * span)
    right = max(0.0, float(finite.max())) + (0.45 * span if (v[ok] >= 0).any() or not ok.any() else 0.02 * span)
    ax.set(xlim=(left, right), yticks=y, yticklabels=labels, xlabel=ylabel)
    ax.axvline(0.0, color="grey", lw=0.5)
    set_title(ax, title, width=64)
    ax.grid(axis="x", alpha=0.3)
    return fig


def plot_bars(labels: Sequence[str], values: Sequence[float], path: str | os.PathLike, **kwargs) -> Path:
    """:func:`bars_figure` saved as a PNG (``highlight`` labels in a second colour; NaN bars read NA)."""
    return save_figure(bars_figure(labels, values, **kwargs), path)
