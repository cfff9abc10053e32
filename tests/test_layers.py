"""docs/architecture.md's layers and homes, read from the source: no import circle, the report below the trainer
and the figures, the widgets without the trainer or the notebook settings (every import is read, lazy ones inside
functions too); one home each for the loss names, the training defaults, the slider readout and the environment
switches; the core's formulas cite the notebook that derives them."""
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
    bad = sorted(t for t in GRAPH[module]
                 if t.startswith(("vlr_lib.train", "vlr_lib.experiments", "vlr_lib.viz", "vlr_lib.widgets")))
    assert not bad, f"{module} imports {bad}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("vlr_lib.train")))
def test_the_trainer_imports_no_experiment(module):
    """vlr_lib.train trains one run; the experiments (grid, showdown, tuned, lessons, records) sit above it."""
    bad = sorted(t for t in GRAPH[module] if t.startswith(("vlr_lib.experiments", "vlr_lib.cli", "vlr_lib.notebook")))
    assert not bad, f"{module} imports {bad}"


def test_the_experiments_live_in_their_own_package():
    assert {"vlr_lib.experiments." + m for m in ("grid_search", "showdown", "tuned", "lessons", "record", "recheck")} \
        <= set(MODULES)
    assert not [m for m in MODULES if m.startswith("vlr_lib.train.")
                and m.rsplit(".", 1)[1] in ("grid_search", "showdown", "tuned", "lessons", "record", "recheck")]


@pytest.mark.parametrize("widget", sorted(m for m in MODULES if m.startswith("vlr_lib.widgets.")))
def test_no_widget_imports_the_trainer_or_the_notebook_settings(widget):
    bad = sorted(t for t in GRAPH[widget]
                 if t == "vlr_lib.notebook" or t.startswith(("vlr_lib.train", "vlr_lib.experiments")))
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


#: The schedule and model-size fields whose defaults live in vlr_lib.train.settings (RUN, PRESETS, FAST) alone.
DEFAULT_FIELDS = {"epochs", "batch_size", "lr", "lr_decay_epoch", "grad_clip", "word_dim", "hidden"}
#: Literal numbers that are not defaults: the check command's one-epoch smoke run, experiment (e)'s clipped runs.
NOT_DEFAULTS = {("vlr_lib.cli.check", "epochs"), ("vlr_lib.cli.check", "batch_size"),
                ("vlr_lib.experiments.lessons", "grad_clip")}


def _literal_fields(module: str) -> set[str]:
    """The DEFAULT_FIELDS a module gives a literal number: as a keyword, a dict key, a parameter or field default."""
    number = lambda v: isinstance(v, ast.Constant) and type(v.value) in (int, float)  # noqa: E731
    found = set()
    for n in ast.walk(ast.parse(MODULES[module].read_text())):
        pairs = []
        if isinstance(n, ast.Call):
            pairs = [(k.arg, k.value) for k in n.keywords]
        elif isinstance(n, ast.Dict):
            pairs = [(k.value, v) for k, v in zip(n.keys, n.values) if isinstance(k, ast.Constant)]
        elif isinstance(n, ast.FunctionDef):
            args = n.args.posonlyargs + n.args.args
            pairs = list(zip([a.arg for a in args[len(args) - len(n.args.defaults):]], n.args.defaults))
            pairs += [(a.arg, d) for a, d in zip(n.args.kwonlyargs, n.args.kw_defaults) if d is not None]
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            pairs = [(n.target.id, n.value)]
        found |= {k for k, v in pairs if k in DEFAULT_FIELDS and number(v)}
    return found


def test_training_defaults_are_written_only_in_the_settings():
    """The command lines, the showdown, the lessons and the fit functions read settings.RUN / PRESETS / FAST."""
    trainer = sorted(m for m in MODULES if m.startswith(("vlr_lib.cli.", "vlr_lib.train.", "vlr_lib.experiments.")))
    written = {(m, f) for m in trainer if m != "vlr_lib.train.settings" for f in _literal_fields(m)}
    assert not written - NOT_DEFAULTS, f"training defaults written outside vlr_lib.train.settings: {written}"
    assert {"epochs", "batch_size", "lr"} <= _literal_fields("vlr_lib.train.settings")


def test_the_slider_readout_lives_with_the_figures():
    defined = {m: {n.name for n in ast.parse(MODULES[m].read_text()).body if isinstance(n, ast.FunctionDef)}
               for m in MODULES}
    assert {"fmt", "readout"} <= defined["vlr_lib.viz.readout"]
    assert not [m for m in REPORT if {"fmt", "readout"} & defined[m]]


def test_one_reader_of_the_environment_switches():
    """VLR_FAST, VLR_RERUN, VLR_BOOK and VLR_DATA are read through vlr_lib.env alone (one meaning of an empty value)."""
    switches = {"VLR_FAST", "VLR_RERUN", "VLR_BOOK", "VLR_DATA"}
    readers = set()
    for module, path in MODULES.items():
        for n in ast.walk(ast.parse(path.read_text())):
            get = isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("get", "getenv")
            key = n.args[0] if get and n.args else n.slice if isinstance(n, ast.Subscript) else None
            if isinstance(key, ast.Constant) and key.value in switches and isinstance(getattr(n, "ctx", ast.Load()),
                                                                                       ast.Load):
                readers.add(module)
    assert not readers - {"vlr_lib.env"}, f"read outside vlr_lib.env: {readers}"
