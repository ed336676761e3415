"""Imports flow one way: no cycle, nothing from a lower layer to a higher one, and few function-level imports.

``scripts/import_layers.py`` parses every module of ``udcg_ltr`` with :mod:`ast` (the layer table and the reasons
are at its top). The budgets of function-level imports of our own modules may only go down: lower them when an
import moves to module level.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from udcg_ltr.paths import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "scripts"))
import import_layers  # noqa: E402

#: Function-level imports of our own modules (issue 17 started at 79, of which 56 deferred no heavy dependency).
FUNCTION_LEVEL_BUDGET = 29
FUNCTION_LEVEL_UNJUSTIFIED_BUDGET = 6


@pytest.fixture(scope="module")
def report():
    return import_layers.analyse(import_layers.build_graph())


def test_no_import_cycle(report):
    assert report.cycles == [], report.cycles


def test_no_upward_import(report):
    lines = [f"{i.source} [{import_layers.layer_of(i.source)[1]}] -> {i.target} "
             f"[{import_layers.layer_of(i.target)[1]}], line {i.line}" for i in report.upward]
    assert not lines, "\n".join(lines)


def test_function_level_imports_stay_within_budget(report):
    counts = report.counts()
    assert counts["function_level_own_imports"] <= FUNCTION_LEVEL_BUDGET, counts
    assert counts["function_level_own_imports_unjustified"] <= FUNCTION_LEVEL_UNJUSTIFIED_BUDGET, counts


def test_every_module_has_a_layer(report):
    graph = import_layers.build_graph()
    for module in graph.modules:
        import_layers.layer_of(module)  # KeyError names a module the table misses


def test_script_prints_machine_read_counts():
    proc = subprocess.run([sys.executable, str(PROJECT_ROOT / "scripts" / "import_layers.py"), "--quiet"],
                          capture_output=True, text=True, timeout=120, check=True)
    counts = dict(line.split(": ") for line in proc.stdout.strip().splitlines())
    assert {"import_cycles", "upward_imports", "function_level_own_imports"} <= set(counts), proc.stdout
    assert all(value.isdigit() for value in counts.values()), proc.stdout


# ---- the checker itself, on a tiny package built here ----------------------------------------------------
def _package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / import_layers.PACKAGE
    for name, text in {"__init__.py": "", **files}.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return pkg


def test_checker_finds_a_cycle_hidden_in_a_function_and_an_upward_import(tmp_path):
    pkg = _package(tmp_path, {
        "io.py": "def f():\n    from udcg_ltr.data import schema\n",            # core -> dataset: upward, hidden
        "data/__init__.py": "",
        "data/schema.py": "from udcg_ltr import io\nfrom . import padded\n",   # relative import resolved
        "data/padded.py": "from udcg_ltr.io import f\n",
        "jobs/__init__.py": "",
        "jobs/train_job.py": "import torch\nfrom udcg_ltr.data.schema import X\n"
                             "def g():\n    from udcg_ltr.data import padded\n",  # downward, function-level
    })
    report = import_layers.analyse(import_layers.build_graph(pkg))
    assert report.cycles == [["udcg_ltr.data.padded", "udcg_ltr.data.schema", "udcg_ltr.io"]]
    assert report.cycles_module_level == []  # the cycle exists only through the function-level import
    assert [(i.source, i.target) for i in report.upward] == [("udcg_ltr.io", "udcg_ltr.data.schema")]
    assert len(report.function_level_own) == 2 and len(report.unjustified) == 2  # nothing heavy deferred


def test_a_function_level_import_that_defers_a_heavy_dependency_is_justified(tmp_path):
    pkg = _package(tmp_path, {
        "models/__init__.py": "",
        "models/net.py": "import torch\n",
        "jobs/__init__.py": "",
        "jobs/run.py": "def f():\n    from udcg_ltr.models import net\n",
    })
    report = import_layers.analyse(import_layers.build_graph(pkg))
    (imp,) = report.function_level_own
    assert report.deferred_heavy[imp] == {"torch"} and report.unjustified == []


def test_type_checking_imports_are_not_edges(tmp_path):
    pkg = _package(tmp_path, {"io.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                       "    from udcg_ltr.jobs import run\n",
                              "jobs/__init__.py": "", "jobs/run.py": "from udcg_ltr import io\n"})
    report = import_layers.analyse(import_layers.build_graph(pkg))
    assert report.upward == [] and report.cycles == []
