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
    assert "vlr_lib.registry" in GRAPH["vlr_lib.train.objective"]
    assert "vlr_lib.viz.html" in GRAPH["vlr_lib.notebook"]  # a lazy one, inside a function


def test_no_import_circle():
    """Between modules (a package's __init__ re-exports its submodules, so edges into it are left out)."""
    graph = {m: {t for t in ts if t not in PACKAGES} for m, ts in GRAPH.items() if m not in PACKAGES}
    circles = [c for m in sorted(graph) if (c := _cycle_from(m, graph))]
    assert not circles, f"import circles: {circles[:3]}"


#: docs/architecture.md's diagram as one table: layer -> (rank, branch, the modules it holds). A module imports its
#: own layer and layers of a lower rank that are on its branch or on none ("train" makes numbers, "draw" draws them);
#: the notebooks' setup, on no branch above both, joins them. Every import is checked, lazy ones too.
LAYERS: dict[str, tuple[int, str | None, tuple[str, ...]]] = {
    "shared": (0, None, ("vlr_lib", "vlr_lib._checks", "vlr_lib._io", "vlr_lib.env", "vlr_lib.paths",
                         "vlr_lib.loss_entry", "vlr_lib.data_sizes")),
    "data": (1, None, ("vlr_lib.data",)),
    "features": (2, None, ("vlr_lib.features", "vlr_lib.models", "vlr_lib.shapes_encoder", "vlr_lib.feature_quality")),
    "S": (3, None, ("vlr_lib.similarity",)),
    "core": (4, None, ("vlr_lib.losses", "vlr_lib.goal", "vlr_lib.metrics", "vlr_lib.analysis", "vlr_lib.registry",
                       "vlr_lib.demo")),
    "report": (5, None, ("vlr_lib.report", "vlr_lib.stats")),
    "grading": (5, None, ("vlr_lib.grading", "vlr_lib.exercises")),
    "train": (6, "train", ("vlr_lib.train",)),
    "experiments": (7, "train", ("vlr_lib.experiments",)),
    "cli": (8, "train", ("vlr_lib.cli", "vlr_lib.__main__")),
    "notebook setup": (9, None, ("vlr_lib.notebook", "vlr_lib.book")),
    "viz": (6, "draw", ("vlr_lib.viz",)),
    "widgets": (7, "draw", ("vlr_lib.widgets",)),
}


def layer_of(module: str) -> str:
    """The layer whose module (or package) is the longest prefix of `module`."""
    found = [(len(prefix), name) for name, (_, _, prefixes) in LAYERS.items() for prefix in prefixes
             if module == prefix or module.startswith(prefix + ".")]
    assert found, f"{module} is in no layer of LAYERS: add it to the table and to docs/architecture.md"
    return max(found)[1]


def allowed(importer: str, target: str) -> bool:
    a, b = layer_of(importer), layer_of(target)
    if a == b:
        return True
    (rank_a, branch_a, _), (rank_b, branch_b, _) = LAYERS[a], LAYERS[b]
    return rank_b < rank_a and (branch_a is None or branch_b in (None, branch_a))


def test_every_module_has_a_layer():
    assert not [m for m in MODULES if not any(m == p or m.startswith(p + ".") for *_, ps in LAYERS.values()
                                                 for p in ps)]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_layers(module):
    bad = sorted(f"{t} ({layer_of(t)})" for t in GRAPH[module] if not allowed(module, t))
    assert not bad, f"{module} ({layer_of(module)}) imports {bad}"


def test_the_rank_table_catches_what_it_should():
    """The table's own rules: a figure never trains, the trainer never imports an experiment, a widget never
    imports the book or a notebook's setup, the report never imports the trainer or a figure."""
    assert not allowed("vlr_lib.viz.goal", "vlr_lib.train.engine")
    assert not allowed("vlr_lib.train.engine", "vlr_lib.experiments.record")
    assert not allowed("vlr_lib.widgets._core", "vlr_lib.book")
    assert not allowed("vlr_lib.report.labels", "vlr_lib.train.settings")
    assert not allowed("vlr_lib.report.labels", "vlr_lib.viz._style")
    assert not allowed("vlr_lib.losses", "vlr_lib.report.labels")
    assert not allowed("vlr_lib.cli.train", "vlr_lib.notebook")
    assert allowed("vlr_lib.widgets._core", "vlr_lib.viz.html") and allowed("vlr_lib.cli.train", "vlr_lib.train")


def test_the_experiments_use_the_trainers_public_api():
    """vlr_lib.experiments imports what vlr_lib.train exports (``__all__``), never one of its submodules."""
    import vlr_lib.train

    public = set(vlr_lib.train.__all__)
    for module in (m for m in MODULES if m.startswith("vlr_lib.experiments")):
        for node in ast.walk(ast.parse(MODULES[module].read_text())):
            if isinstance(node, ast.ImportFrom) and node.level and (node.module or "").startswith("train"):
                assert node.module == "train", f"{module} imports vlr_lib.{node.module}"
                assert not [a.name for a in node.names if a.name not in public], \
                    f"{module} imports {[a.name for a in node.names]} from vlr_lib.train, not all in its __all__"


def test_the_registry_alone_parses_loss_names():
    """Parsing "goal:..." and "warmup:..." and the parameters of a name live in vlr_lib.registry."""
    defined = {m: {n.name for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.FunctionDef)}
               for m, p in MODULES.items()}
    for name in ("schedule", "split_names", "parameters", "resolved", "label"):
        assert name in defined["vlr_lib.registry"]
    owners = [m for m, names in defined.items() if names & {"parse_warmup_name", "loss_parameters", "split_loss_names",
                                                             "loss_label", "loss_name"}]
    assert not owners, f"loss names parsed outside vlr_lib.registry: {owners}"
    literal = re.compile(r"""startswith\(\s*["'](goal|warmup):["']""")
    readers = [m for m, p in MODULES.items() if m != "vlr_lib.registry" and literal.search(p.read_text())]
    assert not readers, f"name forms read outside vlr_lib.registry: {readers}"


def test_the_experiments_live_in_their_own_package():
    assert {"vlr_lib.experiments." + m for m in ("grid_search", "showdown", "tuned", "lessons", "record", "recheck")} \
        <= set(MODULES)
    assert not [m for m in MODULES if m.startswith("vlr_lib.train.")
                and m.rsplit(".", 1)[1] in ("grid_search", "showdown", "tuned", "lessons", "record", "recheck")]


CORE = ("losses", "metrics", "similarity", "goal", "analysis")
DERIVED = re.compile(r"Derived in (notebooks/\d\d_\w+\.py)\.")


def _docstrings(module: str) -> dict[str, str]:
    tree = ast.parse(MODULES[f"vlr_lib.{module}"].read_text())
    return {n.name: ast.get_docstring(n) or "" for n in tree.body if isinstance(n, ast.FunctionDef)}


@pytest.mark.parametrize("module", CORE)
def test_core_functions_cite_the_notebook_that_derives_them(module):
    """Like d2l's "Defined in": every public function of the core says where it is derived, and the notebook
    exists and names it (a helper no notebook needs is private, its name starting with "_")."""
    docs = _docstrings(module)
    cited = {name: DERIVED.search(doc) for name, doc in docs.items()}
    uncited = sorted(name for name, m in cited.items() if not m and not name.startswith("_"))
    assert not uncited, f"public functions of vlr_lib.{module} cite no notebook ('Derived in notebooks/NN_topic.py.'): " \
        f"{uncited}"
    missing = [m.group(1) for m in cited.values() if m and not (PACKAGE.parent / m.group(1)).exists()]
    assert not missing, f"vlr_lib.{module} cites notebooks that do not exist: {missing}"
    unnamed = sorted(f"{name} ({m.group(1)})" for name, m in cited.items()
                     if m and not re.search(rf"\b{re.escape(name)}\b", (PACKAGE.parent / m.group(1)).read_text()))
    assert not unnamed, f"vlr_lib.{module}'s functions cite notebooks that never name them: {unnamed}"
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


#: The figures draw and the core computes, so vlr_lib/viz stays small: issue 32's budget, in lines.
VIZ_BUDGET = 2_000  # issue 32 (notebook 12's paired-difference browser, issue 34, fits within it)


def test_the_figures_stay_within_their_line_budget():
    lines = sum(len(p.read_text().splitlines()) for p in (PACKAGE / "viz").glob("*.py"))
    assert lines <= VIZ_BUDGET, f"vlr_lib/viz has {lines} lines, over its budget of {VIZ_BUDGET}: a number it " \
        "computes belongs in the core or the report, and repeated layout in viz._style"


def test_the_slider_readout_lives_with_the_figures():
    defined = {m: {n.name for n in ast.parse(MODULES[m].read_text()).body if isinstance(n, ast.FunctionDef)}
               for m in MODULES}
    assert {"fmt", "readout"} <= defined["vlr_lib.viz.readout"]
    assert not [m for m in MODULES if m.startswith("vlr_lib.report") and {"fmt", "readout"} & defined[m]]


def _environment_reads(path: Path) -> list[str]:
    """The names of the variables a module reads from os.environ (get, getenv, [...], in), literal or a module
    constant's value."""
    tree = ast.parse(path.read_text())
    constants = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                 for t in n.targets if isinstance(t, ast.Name)}
    environ = lambda x: isinstance(x, ast.Attribute) and x.attr == "environ" or (  # noqa: E731
        isinstance(x, ast.Name) and x.id == "environ")
    keys = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args and (
                (n.func.attr == "get" and environ(n.func.value)) or n.func.attr == "getenv"):
            keys.append(n.args[0])
        elif isinstance(n, ast.Subscript) and environ(n.value) and isinstance(n.ctx, ast.Load):
            keys.append(n.slice)
        elif isinstance(n, ast.Compare) and any(environ(c) for c in n.comparators):
            keys.append(n.left)
    names = [k.value if isinstance(k, ast.Constant) else constants.get(k.id, k.id) if isinstance(k, ast.Name) else "?"
             for k in keys]
    return [str(name) for name in names]


def test_one_reader_of_the_environment_switches():
    """Every VLR_* variable is read through vlr_lib.env alone (one meaning of an empty value, one error naming it)."""
    readers = {m: [v for v in _environment_reads(p) if v.startswith("VLR_") or v == "?"] for m, p in MODULES.items()
               if m != "vlr_lib.env"}
    assert not {m: v for m, v in readers.items() if v}, "VLR_* read outside vlr_lib.env"
    assert "VLR_FLICKR_REPO" not in _environment_reads(MODULES["vlr_lib.data.flickr30k"])
    assert _environment_reads(MODULES["vlr_lib.env"])  # the reader itself is seen
