"""Every notebook opens the same way: one setup cell with all imports, modules by name, then setup().

The convention (docs/architecture.md, "Notebooks"): the first code cell imports everything the
notebook uses -- the library's modules by name (``from vlr_lib import losses, viz``), without
aliases (numpy as np, pandas as pd, torch.nn.functional as F keep their usual ones), no deep paths
into figure or widget modules -- and ends with ``cfg = setup(seed=0)``; no later
code cell imports anything, and figures and explorers are called as ``viz.<topic>.<builder>``
and ``widgets.<topic>.<explorer>``.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
OPENING = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def code_cells(path: Path) -> list[str]:
    cells, current, in_code = [], [], False
    for line in path.read_text().splitlines():
        if line.startswith("# %%"):
            if in_code:
                cells.append("\n".join(current))
            current, in_code = [], "[markdown]" not in line
        elif in_code:
            current.append(line)
    if in_code:
        cells.append("\n".join(current))
    return cells


def imports(source: str) -> list[ast.stmt]:
    return [node for node in ast.walk(ast.parse(source)) if isinstance(node, (ast.Import, ast.ImportFrom))]


@pytest.mark.parametrize("path", OPENING, ids=lambda p: p.stem)
def test_one_setup_cell_then_no_imports(path):
    first, *rest = code_cells(path)
    assert re.search(r"^cfg = setup\(seed=0\)$", first, re.MULTILINE), "the first code cell ends the setup"
    for cell in rest:
        assert not imports(cell), f"an import outside the setup cell: {cell.splitlines()[0]!r}"


@pytest.mark.parametrize("path", OPENING, ids=lambda p: p.stem)
def test_modules_by_name_without_aliases(path):
    for node in imports(code_cells(path)[0]):
        names = node.names
        if any(alias.name.startswith("vlr_lib") for alias in names) or (
                isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vlr_lib")):
            assert all(alias.asname is None for alias in names), "no aliases for the library's modules"
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vlr_lib"):
            assert not node.module.startswith(("vlr_lib.viz", "vlr_lib.widgets")), \
                "figures and explorers as viz.<topic>.<builder>, widgets.<topic>.<explorer>"
            if node.module == "vlr_lib":
                assert all(alias.name.islower() for alias in names)  # modules, not objects
