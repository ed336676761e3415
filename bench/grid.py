"""The paper's grid from the committed annotations: 2 data sets x 2 LLMs in one Hydra multirun, then the summary.

    .venv/bin/python bench/grid.py [--grid-dir outputs/grid] [--n-bootstrap 1000]

Runs ``python -m udcg_ltr.jobs.grid -m grid.dataset=hotpotqa,squad grid.llm=<both LLMs>`` (no LLM is loaded:
every value comes from ``annotations/`` joined to ``../shared/data``), gathers the cells into
``<grid-dir>/summary.{md,png,json}`` and ends with one line per cell::

    grid: dataset=D llm=L n=N udcg=.. udcg_theta=.. ndcg=.. erag=.. diff_theta_vs_ndcg=X [lo, hi] \\
        wrong_oracle_utility=.. wrong_oracle_relevance=..

and one ``agreement:`` line per data set (the two LLMs' utilities of the same passages).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from udcg_ltr.jobs import grid as grid_job  # noqa: E402
from udcg_ltr.paths import data_dir  # noqa: E402
from udcg_ltr.studies import grid, grid_report  # noqa: E402

LLMS = ("qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct")


def run_multirun(grid_dir: Path, n_bootstrap: int, extra: list[str]) -> None:
    cmd = [sys.executable, "-m", "udcg_ltr.jobs.grid", "-m", f"grid.dataset={','.join(grid.GRID_DATASETS)}",
           f"grid.llm={','.join(LLMS)}", f"grid_dir={grid_dir}", f"n_bootstrap={n_bootstrap}", *extra]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)


def spec_factory(annotations_dir: Path):
    def spec_of(dataset: str, llm: str) -> grid.CellSpec:
        return grid.CellSpec(dataset, llm, str(data_dir()), str(annotations_dir), questions_from=LLMS[1])
    return spec_of


def publish(grid_dir: Path, dest: Path) -> None:
    """The summary and every cell's report and figure, flat in ``dest`` (``<dataset>__<llm>.md`` / ``.png``)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("summary.md", "summary.png"):
        shutil.copyfile(grid_dir / name, dest / name)
    for cell in sorted(grid_dir.glob(f"*/{grid_job.CELL_FILE}")):
        for suffix in (".md", ".png"):
            shutil.copyfile(cell.parent / f"cell{suffix}", dest / f"{cell.parent.name}{suffix}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid-dir", type=Path, default=ROOT / "outputs" / "grid")
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    parser.add_argument("--annotations-dir", type=Path, default=ROOT / "annotations")
    parser.add_argument("--publish", type=Path, default=None,
                        help="also copy summary.md / .png and each cell's report here (the README links docs/grid)")
    args, extra = parser.parse_known_args(argv)
    if not (data_dir() / "annotated_full").is_dir():
        print(f"the shared data is not under {data_dir()} (set UDCG_LTR_DATA)", file=sys.stderr)
        return 2
    run_multirun(args.grid_dir, args.n_bootstrap, [f"grid.annotations_dir={args.annotations_dir}", *extra])
    summary = grid_job.summarize(args.grid_dir, spec_factory(args.annotations_dir))
    print(f"summary: {args.grid_dir / 'summary.md'} {args.grid_dir / 'summary.png'}")
    if args.publish is not None:
        publish(args.grid_dir, args.publish)
    for row in summary["agreement"]:
        print(f"agreement: dataset={row['dataset']} passages={row['passages']} spearman={row['spearman']:.3f} "
              f"[{row['spearman_lo']:.3f}, {row['spearman_hi']:.3f}] sign_changed={row['sign_changed']:.3f} "
              f"distractor_class_changed={row['distractor_class_changed']:.3f}")
    for cell in summary["cells"]:
        print(grid_report.bench_line(cell))
    return 0


if __name__ == "__main__":
    sys.exit(main())
