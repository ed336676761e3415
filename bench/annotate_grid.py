"""Annotate several grid cells in one process, so that an LLM loaded once serves them all (a GPU lease's recipe).

Each ``--cell`` is a list of ``python -m udcg_ltr.jobs.annotate_cell`` overrides; ``--common`` overrides apply to
every cell (the LLM and its device). ``--budget-seconds`` is shared: each cell gets what the earlier ones left
(its ``max_seconds``), and an unfinished cell resumes when the same command runs again. Example, the 1.5B
reader's two cells on a GPU (the GGUF assembled beforehand from its parts, see README "The grid")::

    python bench/annotate_grid.py --budget-seconds 400 \\
        --common llm=qwen2.5-coder-1.5b llm.device=cuda llm.batch_size=256 +llm.max_batch_tokens=131072 \\
        --cell dataset=hotpotqa 'plan.questions={all: 300}' \\
        --cell dataset=annotated_squad_full 'plan.questions={test: 600, train: 1000}' plan.chunk_questions=100

The last lines are ``annotate_grid: cell=<output> questions=N contexts=M seconds=S``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from udcg_ltr.jobs import annotate_cell  # noqa: E402
from udcg_ltr.paths import PROJECT_ROOT  # noqa: E402


def compose_cell(overrides: list[str]):
    from hydra import compose, initialize_config_dir

    # Outside a Hydra run there is no ${hydra:runtime...}: pin the paths the config derives from it.
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        return compose(config_name="annotate_cell", overrides=[f"paths.root_dir={PROJECT_ROOT}", *overrides])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", nargs="+", action="append", required=True, help="one cell's overrides")
    parser.add_argument("--common", nargs="*", default=[], help="overrides of every cell")
    parser.add_argument("--budget-seconds", type=float, default=None)
    args = parser.parse_args(argv)
    start, lines = time.perf_counter(), []
    for cell in args.cell:
        overrides = [*args.common, *cell]
        if args.budget_seconds is not None:
            left = args.budget_seconds - (time.perf_counter() - start)
            overrides.append(f"plan.max_seconds={max(left, 0.0):.0f}")
        cfg = compose_cell(overrides)
        t0 = time.perf_counter()
        summary = annotate_cell.run(cfg)
        lines.append(f"annotate_grid: cell={cfg.plan.output} questions={summary['sizes']['questions']} "
                     f"contexts={summary['sizes']['contexts']} seconds={time.perf_counter() - t0:.0f}")
        print(lines[-1], flush=True)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
