"""The grid in one command: every (data set, LLM) cell measured from its committed annotations.

    python -m udcg_ltr.jobs.grid -m grid.dataset=hotpotqa,squad \\
        grid.llm=qwen2.5-coder-0.5b-instruct,qwen2.5-coder-1.5b-instruct

Each cell job writes ``cell.json``, ``cell.md``, ``correlation.csv`` and ``cell.png`` into
``outputs/grid/<dataset>__<llm>/`` and prints its ``grid:`` line; :func:`summarize` (``bench/grid.py`` runs it
after the multirun) gathers the cells into ``summary.md`` / ``summary.png`` / ``summary.json`` with the cross-LLM
utility agreement per data set.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

for _var, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("WANDB_MODE", "offline")):
    os.environ.setdefault(_var, _value)

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from udcg_ltr.io import atomic_write_json, atomic_write_text, json_safe  # noqa: E402
from udcg_ltr.jobs.settings import GridSettings, job_settings  # noqa: E402
from udcg_ltr.paths import PROJECT_ROOT  # noqa: E402
from udcg_ltr.report import save_figure, write_csv  # noqa: E402
from udcg_ltr.studies import grid, grid_report  # noqa: E402

CELL_FILE = "cell.json"


def compute_cell(spec: grid.CellSpec, *, n_bootstrap: int, seed: int) -> dict[str, Any]:
    """Every result of one cell, as plain data."""
    cell = spec.load()
    has_train = any(r.split == "train" for r in cell.records)
    return {"dataset": spec.dataset, "llm": spec.llm, "questions": len(cell.records), "contexts": len(cell.runs),
            "outcomes": dict(Counter(r.outcome for r in cell.runs)),
            "fit": "on the train split, scored on the others" if has_train else
                   f"by {grid.CROSS_FIT_FOLDS}-fold cross-fitting over questions",
            "correlation": grid.correlation_rows(cell, n_bootstrap=n_bootstrap, seed=seed),
            "oracle": grid.oracle_rows(cell, n_bootstrap=n_bootstrap, seed=seed),
            "distractors": grid.distractor_rows(cell, n_bootstrap=n_bootstrap, seed=seed),
            "provenance": cell.provenance}


def write_cell(result: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    write_csv(out_dir / "correlation.csv", result["correlation"])
    save_figure(grid_report.cell_figure(result), out_dir / "cell.png")
    atomic_write_text(out_dir / "cell.md", grid_report.cell_markdown(result))
    atomic_write_json(out_dir / CELL_FILE, json_safe(result))  # last: a cell.json means a finished cell


def read_cells(root: Path) -> list[dict[str, Any]]:
    """The finished cells under ``root``, in (data set, LLM) order."""
    cells = [json.loads(p.read_text()) for p in sorted(root.glob(f"*/{CELL_FILE}"))]
    return sorted(cells, key=lambda c: (c["dataset"], c["llm"]))


def agreement_rows(cells: list[dict[str, Any]], spec_of) -> list[dict[str, Any]]:
    """Per data set with two LLMs' cells: :func:`grid.utility_agreement` of their utilities."""
    rows = []
    for dataset in sorted({c["dataset"] for c in cells}):
        llms = sorted(c["llm"] for c in cells if c["dataset"] == dataset)
        if len(llms) == 2:
            a, b = (spec_of(dataset, llm).load() for llm in llms)
            rows.append({"dataset": dataset, **grid.utility_agreement(a, b)})
    return rows


def summarize(root: Path, spec_of) -> dict[str, Any]:
    """Gather the cells under ``root`` into summary.md / summary.png / summary.json; returns the summary."""
    cells = read_cells(root)
    summary = {"cells": cells, "agreement": agreement_rows(cells, spec_of)}
    save_figure(grid_report.grid_figure(cells), root / "summary.png")
    text = ["# The grid", "", grid_report.summary_markdown(cells), "", "## Utility agreement across LLMs", "",
            grid_report.agreement_markdown(summary["agreement"]), ""]
    atomic_write_text(root / "summary.md", "\n".join(text))
    atomic_write_json(root / "summary.json", json_safe(summary))
    return summary


@hydra.main(config_path=os.fspath(PROJECT_ROOT / "conf"), config_name="grid", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from hydra.utils import instantiate

    settings = job_settings(GridSettings, cfg)
    spec = instantiate(cfg.grid)
    result = compute_cell(spec, n_bootstrap=settings.n_bootstrap, seed=settings.seed)
    write_cell(result, Path(cfg.paths.output_dir))
    print(grid_report.bench_line(result), flush=True)


if __name__ == "__main__":
    main()
