"""Shared report helpers: markdown / CSV tables, number formatting, PNG figures; a report's W&B payload."""

from __future__ import annotations

import math

import numpy as np
import pytest

from udcg_ltr.report import (
    Column,
    fmt_ci,
    fmt_float,
    fmt_p,
    markdown_table,
    plot_bars,
    plot_lines,
    read_csv,
    write_table,
)
from udcg_ltr.tracking import RunLogger, as_run_logger


def test_formatting():
    assert fmt_float(0.12345) == "0.123" and fmt_float(float("nan")) == "NA" and fmt_float(None) == "NA"
    assert fmt_ci(0.5, 0.25, 0.75) == "0.500 [0.250, 0.750]"
    assert fmt_ci(float("nan"), 0, 1) == "NA"
    assert fmt_p(0.0001) == "<0.001" and fmt_p(0.04) == "0.040" and fmt_p(None) == "-" and fmt_p(math.nan) == "NA"


def test_markdown_and_csv(tmp_path):
    rows = [{"name": "a|b", "x": 0.5, "n": 3}, {"name": "c", "x": float("nan"), "n": None}]
    md = markdown_table(rows, [Column("name", "Name"), Column("x", "X", lambda v: fmt_float(v, 1)), "n"])
    lines = md.strip().splitlines()
    assert lines[0] == "| Name | X | n |" and lines[1] == "| :-- | --: | --: |"
    assert lines[2] == "| a\\|b | 0.5 | 3 |" and lines[3] == "| c | NA |  |"
    paths = write_table(tmp_path / "t", rows, title="T", note="note")
    assert paths["md"].read_text().startswith("### T")
    back = read_csv(paths["csv"])
    assert back == [{"name": "a|b", "x": "0.5", "n": "3"}, {"name": "c", "x": "", "n": ""}]


def test_figures(tmp_path):
    p1 = plot_lines([1, 2, 3], {"a": [0.1, 0.2, np.nan], "b": {"y": [0.3, 0.2, 0.1], "lo": [0.2, 0.1, 0.0],
                                                                "hi": [0.4, 0.3, 0.2]}}, tmp_path / "l.png")
    p2 = plot_bars(["x", "y", "z"], [0.5, np.nan, -0.2], tmp_path / "b.png", lo=[0.4, np.nan, -0.3],
                   hi=[0.6, np.nan, -0.1], highlight=["x"])
    for p in (p1, p2):
        assert p.read_bytes()[:4] == b"\x89PNG"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["b.png", "l.png"]  # atomic: no temp files


def test_log_results_wandb_payload(tmp_path):
    import wandb

    png = plot_lines([0, 1], {"a": [0, 1]}, tmp_path / "a.png")
    logged = []

    class Run:
        def log(self, payload):
            logged.append(payload)

    payload = as_run_logger(Run()).log_results({"t": [{"m": "x", "v": float("nan")}]}, {"img": png}, {"s": 1.0},
                                               prefix="p/")
    assert logged == [payload]
    assert isinstance(payload["p/t"], wandb.Table) and isinstance(payload["p/img"], wandb.Image)
    assert payload["p/t"].data == [["x", None]]
    assert payload["p/s"] == 1.0
    # the plain logger writes the table as CSV and the scalar into the run summary
    local = RunLogger(tmp_path / "run")
    assert local.log_results({"t": [{"m": "x", "v": 0.5}]}, scalars={"s": 2.0}, prefix="p/")["p/s"] == 2.0
    assert read_csv(tmp_path / "run" / "p_t.csv") == [{"m": "x", "v": "0.5"}]
    assert local._summary == {"p/s": 2.0}
    with pytest.raises(TypeError):
        as_run_logger(object())
