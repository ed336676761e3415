"""Plots people can read at a glance (issue 18, item 5): bars carry their values and CIs, titles name the data
set, split and number of queries, no line is hidden under another, the sweep plot shows the optimised metric.

The checks read the matplotlib artists of the figures the ``*_figure`` functions return.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from matplotlib.colors import to_rgba
from test_studies_common import LLM, FakeScorer, annotate, make_record

from udcg_ltr.jobs.plots import outcomes_figure, systems_figure
from udcg_ltr.jobs.systems import SystemResult
from udcg_ltr.report import bars_figure, lines_figure, merge_identical, plot_bars, plot_lines
from udcg_ltr.studies import distractors, oracle, position
from udcg_ltr.studies.common import plot_title
from udcg_ltr.studies.correlation import row_label
from udcg_ltr.studies.position import position_figure, predicted_curves
from udcg_ltr.sweeps import collect_jobs, sweep_figure


def data_lines(ax):
    """The labelled data lines of ``ax`` (error-bar caps and helper lines have labels starting with ``_``)."""
    return [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]


def assert_no_line_hidden(ax):
    """No two series drawn with the same style, and none drawn over exactly the same points as another."""
    lines = data_lines(ax)
    for a, b in itertools.combinations(lines, 2):
        style_a = (to_rgba(a.get_color()), a.get_marker(), a.get_linestyle())
        style_b = (to_rgba(b.get_color()), b.get_marker(), b.get_linestyle())
        assert style_a != style_b, (a.get_label(), b.get_label())
        same_points = (np.array_equal(np.asarray(a.get_xdata(), float), np.asarray(b.get_xdata(), float))
                       and np.allclose(np.asarray(a.get_ydata(), float), np.asarray(b.get_ydata(), float),
                                       equal_nan=True))
        assert not same_points, (a.get_label(), b.get_label())
    return lines


def texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_bars_carry_their_value_and_ci_beyond_the_whisker(tmp_path):
    fig = bars_figure(["a", "b", "c"], [0.5, np.nan, -0.2], lo=[0.4, np.nan, -0.3], hi=[0.6, np.nan, -0.1],
                      title=plot_title("Correlation", dataset="toy", n_queries=30, by_split={"test": 30}))
    ax = fig.axes[0]
    by_text = {t.get_text(): t for t in ax.texts}
    assert set(by_text) == {"0.500 [0.400, 0.600]", "NA", "-0.200 [-0.300, -0.100]"}
    assert by_text["0.500 [0.400, 0.600]"].get_position()[0] > 0.6  # right of the upper whisker
    assert by_text["-0.200 [-0.300, -0.100]"].get_position()[0] < -0.3  # left of the lower whisker
    lo, hi = ax.get_xlim()
    assert lo < -0.3 and hi > 0.6
    assert ax.get_title() == "Correlation\ntoy, split test: 30 queries"
    fig2 = bars_figure(["x"], [41.66], digits=1)
    assert texts(fig2.axes[0]) == ["41.7"]
    assert plot_bars(["x"], [0.1], tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"


def test_identical_series_are_merged_and_the_others_drawn_apart(tmp_path):
    ranks = np.arange(1, 6)
    series = {"nDCG": 1 / np.log2(ranks + 1), "MRR": 1 / ranks, "MAP": 1 / ranks, "Precision": np.full(5, 0.2),
              "UDCG": {"y": np.full(5, 0.2), "lo": np.full(5, 0.1), "hi": np.full(5, 0.3)}}
    assert list(merge_identical(series)) == ["nDCG", "MRR = MAP", "Precision", "UDCG"]  # same y, other CI: kept
    fig = lines_figure(ranks, series, title="t")
    ax = fig.axes[0]
    lines = assert_no_line_hidden(ax)
    assert [ln.get_label() for ln in lines] == ["nDCG", "MRR = MAP", "Precision", "UDCG"]
    # Precision and UDCG have the same values: dodged sideways, so both stay visible
    xs = {ln.get_label(): np.asarray(ln.get_xdata(), float) for ln in lines}
    assert not np.allclose(xs["Precision"], xs["UDCG"]) and np.all(np.abs(xs["UDCG"] - ranks) < 0.2)
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(r) for r in ranks]  # ticks at the true x
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["nDCG", "MRR = MAP", "Precision", "UDCG"]
    # a dozen series: every style differs
    many = {f"m{i}": np.linspace(0, 1, 5) + i for i in range(12)}
    assert len(assert_no_line_hidden(lines_figure(ranks, many).axes[0])) == 12
    assert plot_lines(ranks, series, tmp_path / "l.png").read_bytes()[:4] == b"\x89PNG"


def test_position_figure_shows_every_metric_curve_and_the_accuracies():
    k = 4
    acc = [0.9, 0.55, 0.5, 0.6]
    rows = [{"correct": a, "correct_lo": a - 0.1, "correct_hi": min(a + 0.1, 1.0)} for a in acc]
    curves = predicted_curves(k)  # MRR and MAP are both 1/i; Precision is flat
    title = plot_title("Positional bias, k = 4", dataset="toy", n_queries=20, llm=LLM, by_split={"test": 20})
    fig = position_figure(rows, curves, None, k=k, n=20, llm=LLM, title=title)
    ax, ax2 = fig.axes
    labels = [ln.get_label() for ln in assert_no_line_hidden(ax2)]
    # legends show each curve's row_label (the metric table's display names), the keys stay in the data
    assert labels == ["nDCG", "MRR = MAP", row_label("precision")] and set(curves) == {"ndcg", "mrr", "map", "precision"}
    assert {"90.0%", "55.0%", "50.0%", "60.0%"} <= set(texts(ax))
    assert "toy, split test: 20 queries" in ax.get_title() and LLM in ax.get_title()


def _system(name, rng, n=12, outcomes=True):
    per_query = {"udcg@5": rng.uniform(0.3, 0.7, n), "ndcg@5": rng.uniform(0.2, 0.9, n)}
    return SystemResult(name, per_query, outcomes=list(rng.choice(["correct", "abstained", "wrong"], n))
                        if outcomes else None, context_sizes=np.full(n, 5))


def test_system_bars_carry_means_and_bootstrap_cis():
    rng = np.random.default_rng(0)
    results = [_system("retriever@5", rng), _system("reranker@5", rng)]
    fig = systems_figure(results, 5, title="demo, split ['test']: 12 queries, LLM x, k = 5")
    ax = fig.axes[0]
    shown = texts(ax)
    for r in results:
        for name in ("udcg@5", "ndcg@5"):
            assert f"{np.mean(r.per_query[name]):.3f}" in shown
    bars = [c for c in ax.containers if hasattr(c, "errorbar")]
    assert len(bars) == 2 and all(c.errorbar is not None for c in bars)  # one bar group per metric, with CIs
    assert ax.get_title().startswith("demo, split ['test']: 12 queries")
    assert "12 queries" in systems_figure(results, 5).axes[0].get_title()  # the default title counts queries
    outcome_ax = outcomes_figure(results).axes[0]
    shares = [100 * results[0].summary()[f"{o}_rate"] for o in ("correct", "abstained", "wrong")]
    assert {f"{s:.1f}%" for s in shares if s > 0} <= set(texts(outcome_ax))
    assert "12 queries" in outcome_ax.get_title()


def test_sweep_plot_shows_the_optimised_metric_with_values(tmp_path):
    values = (0.52, 0.61, 0.58)
    for i, v in enumerate(values):
        folder = tmp_path / f"job{i}"
        folder.mkdir()
        (folder / "job_result.json").write_text(json.dumps({
            "status": "finished", "config_hash": "x", "metrics": {"annotate/passages": 80.0, "test/udcg@5": v},
            "config": {"optimized_metric": "test/udcg@5", "dataset": {"name": "squad"}}}))
    jobs = collect_jobs(tmp_path)
    ax = sweep_figure(jobs, "test/udcg@5", sweep_name="s").axes[0]
    assert [round(p.get_height(), 6) for p in ax.patches] == list(values)
    assert texts(ax) == [f"{v:.4f}" for v in values]
    title = " ".join(ax.get_title().split())  # wrapped lines read as one
    assert "test/udcg@5 (the optimised metric)" in title and "data set squad" in title
    assert ax.get_ylabel() == "test/udcg@5"


def _world(n=18, seed=0):
    rng = np.random.default_rng(seed)
    recs = []
    for i in range(n):
        pool = list(np.round(rng.random(int(rng.integers(5, 9))), 3))
        pool.insert(int(rng.integers(0, len(pool) + 1)), "R")
        recs.append(make_record(i, pool, split=["val", "test"][i % 2]))
    annotate(recs)
    return recs


@pytest.mark.parametrize(("module", "spied", "params"), [
    (distractors, "plot_bars", {"k": 3}), (oracle, "plot_bars", {"ks": (2,)}),
    (position, "position_figure", {"k": 3})])
def test_study_plots_name_the_data_set_split_and_queries(module, spied, params, tmp_path, monkeypatch):
    seen = []
    real = getattr(module, spied)

    def spy(*args, **kwargs):
        seen.append(kwargs["title"])
        return real(*args, **kwargs)

    monkeypatch.setattr(module, spied, spy)
    run = {distractors: distractors.run_distractor_sensitivity, oracle: oracle.run_oracle_contexts,
           position: position.run_positional_bias}[module]
    report = run(_world(), FakeScorer(), llm=LLM, out_dir=tmp_path, dataset="toy", splits=("test",),
                 n_bootstrap=50, cache=None, progress=False, **params)
    (title,) = seen
    assert f"toy, split test: {report.n_queries} queries, LLM {LLM}" in title, title
    assert report.paths["png"].read_bytes()[:4] == b"\x89PNG"
