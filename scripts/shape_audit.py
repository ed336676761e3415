"""The code's shape, counted over ``udcg_ltr/`` with the ``ast`` module (issue 30's figures and goals).

Prints machine-read ``name: value`` lines:

- ``fit_reranker_lines``: lines of ``udcg_ltr/models/training.py:fit_reranker`` from its ``def`` line to its last line
  (``end_lineno - lineno + 1``: signature, docstring and body; decorators not counted);
- ``fit_reranker_parameters``: its named parameters (positional-only, positional, keyword-only); ``*args`` /
  ``**kwargs`` and a method's ``self`` / ``cls`` are not counted;
- ``functions_over_80_lines``: functions and methods (nested ones included) over 80 lines, counted as above;
- ``functions_over_12_parameters``: functions and methods with over 12 parameters, counted as above;
- ``config_casts_and_gets_in_jobs``: in ``udcg_ltr/jobs/``, hand casts ``int(...)`` / ``float(...)`` /
  ``bool(...)`` / ``str(...)`` whose argument is anything but a bare name (``int(cfg.k)``,
  ``float(c.get("gamma") or 1 / 3)``, ``str(run_dir / "model")``; ``int(n)`` of a local and ``float("nan")`` of a
  constant are not counted), plus ``.get("...")`` calls whose first argument is a string literal. Also printed apart as
  ``config_casts_in_jobs`` and ``config_gets_in_jobs``. ``jobs/annotate_cell.py`` (issue 29's annotation-grid job,
  which arrived as issue 30 was counted) is left out of these three and counted alone as
  ``config_casts_and_gets_in_annotate_cell``.

Issue 30's "today" figures (129, 38, 6, 12, 183 = 81 casts + 102 gets) are what this count gives at commit
``b94c338``.

``--root DIR`` audits another checkout (``git worktree add /tmp/old <rev>``); ``--list`` also names the functions
over the limits. Usage: ``python scripts/shape_audit.py [--root DIR] [--list]``.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

LINE_LIMIT, PARAMETER_LIMIT = 80, 12
CASTS = ("int", "float", "bool", "str")
SEPARATE_JOBS = ("annotate_cell.py",)


def functions(package: Path) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """``(file relative to the package's parent, function node)`` for every function and method, nested ones too."""
    out = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        out += [(path.relative_to(package.parent).as_posix(), node) for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    return out


def n_lines(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1


def n_parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    named = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    return len(named) - (1 if named[:1] in (["self"], ["cls"]) else 0)


def casts_and_gets(paths: list[Path]) -> tuple[int, int]:
    casts = gets = 0
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            first = node.args[0]
            if isinstance(node.func, ast.Name) and node.func.id in CASTS \
                    and not isinstance(first, ast.Name | ast.Constant):
                casts += 1
            elif isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                    and isinstance(first, ast.Constant) and isinstance(first.value, str):
                gets += 1
    return casts, gets


def audit(root: Path) -> tuple[dict[str, int], dict[str, list[str]]]:
    found = functions(root / "udcg_ltr")
    fit = [node for path, node in found if path == "udcg_ltr/models/training.py" and node.name == "fit_reranker"]
    long = [f"{path}:{node.name} ({n_lines(node)} lines)" for path, node in found if n_lines(node) > LINE_LIMIT]
    wide = [f"{path}:{node.name} ({n_parameters(node)} parameters)" for path, node in found
            if n_parameters(node) > PARAMETER_LIMIT]
    jobs = sorted((root / "udcg_ltr" / "jobs").glob("*.py"))
    casts, gets = casts_and_gets([p for p in jobs if p.name not in SEPARATE_JOBS])
    figures = {"fit_reranker_lines": n_lines(fit[0]), "fit_reranker_parameters": n_parameters(fit[0]),
               "functions_over_80_lines": len(long), "functions_over_12_parameters": len(wide),
               "config_casts_and_gets_in_jobs": casts + gets, "config_casts_in_jobs": casts,
               "config_gets_in_jobs": gets,
               "config_casts_and_gets_in_annotate_cell": sum(casts_and_gets([p for p in jobs
                                                                           if p.name in SEPARATE_JOBS]))}
    return figures, {"over_80_lines": long, "over_12_parameters": wide}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="checkout to audit (default: this one)")
    parser.add_argument("--list", action="store_true", help="also name the functions over the limits")
    args = parser.parse_args()
    figures, lists = audit(args.root)
    if args.list:
        for name, rows in lists.items():
            for row in rows:
                print(f"# {name}: {row}")
    for name, value in figures.items():
        print(f"{name}: {value}")


if __name__ == "__main__":
    main()
