"""docs/architecture.md's layers, read from the imports: no import circle, the report below the trainer, the
widgets without the trainer or the notebook settings. Every import is read (lazy ones inside functions too)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "vlr_lib"


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}
PACKAGES = {m for m, p in MODULES.items() if p.name == "__init__.py"}


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The vlr_lib modules an import statement names (a name imported from a package may be its submodule)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = module.split(".") if module in PACKAGES else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1] if node.level else []
        prefix = ".".join(base + ([node.module] if node.module else []))
        names = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in MODULES else prefix for a in node.names]
    out = []
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.append(name)
    return out


def imports() -> dict[str, set[str]]:
    graph = {}
    for module, path in MODULES.items():
        nodes = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, (ast.Import, ast.ImportFrom))]
        graph[module] = {t for n in nodes for t in _targets(module, n)}
    return graph


GRAPH = imports()


def _cycle_from(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A path start -> ... -> start through `graph`, or None (depth-first)."""
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in graph.get(node, ()):
            if nxt == start:
                return path + [start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


def test_the_import_graph_is_read():
    assert "vlr_lib.train.objective" in GRAPH["vlr_lib.train.engine"]  # a relative import
    assert "vlr_lib.goal" in GRAPH["vlr_lib.train.objective"]  # a lazy one, inside a function
    assert "vlr_lib.names" in GRAPH["vlr_lib.report.labels"]


def test_no_import_circle():
    """Between modules (a package's __init__ re-exports its submodules, so edges into it are left out)."""
    graph = {m: {t for t in ts if t not in PACKAGES} for m, ts in GRAPH.items() if m not in PACKAGES}
    circles = [c for m in sorted(graph) if (c := _cycle_from(m, graph))]
    assert not circles, f"import circles: {circles[:3]}"


REPORT = sorted(m for m in MODULES if m == "vlr_lib.report" or m.startswith("vlr_lib.report."))


@pytest.mark.parametrize("module", REPORT)
def test_the_report_imports_nothing_from_the_trainer_or_the_figures(module):
    bad = sorted(t for t in GRAPH[module] if t.startswith(("vlr_lib.train", "vlr_lib.viz", "vlr_lib.widgets")))
    assert not bad, f"{module} imports {bad}"


@pytest.mark.parametrize("widget", sorted(m for m in MODULES if m.startswith("vlr_lib.widgets.")))
def test_no_widget_imports_the_trainer_or_the_notebook_settings(widget):
    bad = sorted(t for t in GRAPH[widget] if t == "vlr_lib.notebook" or t.startswith("vlr_lib.train"))
    assert not bad, f"{widget} imports {bad}"


def test_one_module_owns_the_loss_names():
    """Parsing "warmup:..." and the parameters of a name live in vlr_lib.names; the trainer and report import them."""
    for module in ("vlr_lib.train.objective", "vlr_lib.report.labels"):
        assert "vlr_lib.names" in GRAPH[module]
    tree = ast.parse(MODULES["vlr_lib.train.objective"].read_text())
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert not defined & {"parse_warmup_name", "loss_parameters", "split_loss_names"}


CORE = ("losses", "metrics", "similarity", "goal", "analysis")
DERIVED = re.compile(r"Derived in (notebooks/\d\d_\w+\.py)\.")


def _docstrings(module: str) -> dict[str, str]:
    tree = ast.parse(MODULES[f"vlr_lib.{module}"].read_text())
    return {n.name: ast.get_docstring(n) or "" for n in tree.body if isinstance(n, ast.FunctionDef)}


@pytest.mark.parametrize("module", CORE)
def test_core_functions_cite_the_notebook_that_derives_them(module):
    """Like d2l's "Defined in": a core formula says where it is derived, and the notebook exists."""
    docs = _docstrings(module)
    cited = {name: DERIVED.search(doc) for name, doc in docs.items()}
    assert any(cited.values()), f"no function of vlr_lib.{module} cites its notebook"
    missing = [m.group(1) for m in cited.values() if m and not (PACKAGE.parent / m.group(1)).exists()]
    assert not missing, f"vlr_lib.{module} cites notebooks that do not exist: {missing}"
    main = {"losses": ("triplet_all", "triplet_hardest", "info_nce", "unified", "sampled_softmax",
                       "cross_example_softmax", "smooth_ap"),
            "metrics": ("retrieval_metrics", "map_at_k", "pr_auc"), "similarity": ("similarity",),
            "goal": ("goal_gradient", "goal_objective"), "analysis": ("loss_gradient", "cocos")}[module]
    assert not [name for name in main if not cited.get(name)]
