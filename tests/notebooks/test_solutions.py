"""Every exercise has its solution, and every solution is a code cell that runs.

The exercises' solutions are code cells tagged ``solution`` (and ``hide-cell``: the book hides
them behind "Show solution") with ``jupyter.source_hidden`` and ``outputs_hidden`` (JupyterLab
shows them collapsed). nbval executes them with the rest of the notebook (``make test``), so a
solution that breaks fails the tests; this module checks the structure: one solution cell per
exercise, in order, numbered like the exercises. A derivation ("show that") is written before its
code as a Markdown cell tagged ``solution`` ("**Solution N, the derivation.**", rendered math), so the
student edition drops it with the code; a solution's code comments carry no LaTeX (no proof in a comment).
"""
from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest

from vlr_lib import book

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.py"))
SOLUTION_TAGS = {"solution", "hide-cell"}
COLLAPSED = {"source_hidden": True, "outputs_hidden": True}
# An exercise is a numbered item of the Exercises section: "1. ..." or "**1.** ..." at a line's start.
EXERCISE = re.compile(r"^(?:\*\*)?(\d+)\.(?:\*\*)?\s", re.MULTILINE)


def exercise_cells(nb) -> list:
    """The cells from the "## Exercises" heading to the end of the notebook."""
    start = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and "## Exercises" in c.source)
    return nb.cells[start:]


@pytest.fixture(params=NOTEBOOKS, ids=lambda p: p.stem)
def notebook(request):
    return jupytext.read(request.param)


def test_every_exercise_has_its_solution_cell(notebook):
    cells = exercise_cells(notebook)
    exercises = [int(n) for c in cells if c.cell_type == "markdown" for n in EXERCISE.findall(c.source)]
    solutions = [c for c in cells if c.cell_type == "code" and "solution" in c.metadata.get("tags", [])]
    assert exercises == list(range(1, len(exercises) + 1)) and exercises, "exercises numbered 1, 2, ..."
    assert [int(re.match(r"# Solution (\d+)\.", c.source).group(1)) for c in solutions] == exercises


def test_written_solutions_precede_their_code(notebook):
    cells = notebook.cells
    for i, cell in enumerate(cells):
        if cell.cell_type == "markdown" and "solution" in cell.metadata.get("tags", []):
            number = re.match(r"\*\*Solution (\d+), the (?:derivation|answer)\.\*\*", cell.source)
            assert number, f"a written solution opens with **Solution N, the derivation.**: {cell.source[:60]!r}"
            assert cell.metadata.get("jupyter") == {"source_hidden": True} and cell.metadata["tags"] == ["solution"]
            following = cells[i + 1]
            assert following.cell_type == "code" and following.source.startswith(f"# Solution {number.group(1)}.")


def test_no_proof_in_a_code_comment(notebook):
    """Math belongs in Markdown, where it renders: no $...$ in the comments of a solution's code."""
    for cell in notebook.cells:
        if cell.cell_type == "code" and "solution" in cell.metadata.get("tags", []):
            comments = [line for line in cell.source.splitlines() if line.lstrip().startswith("#")]
            assert not any("$" in line for line in comments), cell.source.splitlines()[0]


def test_solutions_are_tagged_collapsed_code(notebook):
    tagged = [c for c in notebook.cells if c.cell_type == "code" and "solution" in c.metadata.get("tags", [])]
    for cell in tagged:
        assert cell.cell_type == "code"
        assert SOLUTION_TAGS <= set(cell.metadata["tags"])
        assert cell.metadata.get("jupyter") == COLLAPSED
        # JupyterLab shows a solution's outputs collapsed: an explorer there could not be used (nor browser-tested)
        code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith("#"))
        assert not re.search(r"\bwidgets\.\w+\.\w+\(", code), "no explorer in a solution"
    for cell in notebook.cells:  # no solution is left where nbval cannot run it
        assert "<details>" not in cell.source, "a solution in Markdown: make it a tagged code cell"


def test_longer_exercises_are_tagged_and_ask_before_training(notebook):
    """A solution that trains new runs only when asked calls `longer_exercise` and is tagged so; its `RUN`
    is off as shipped, so a Run All, nbval and the book leave its training out in full mode."""
    for cell in notebook.cells:
        if cell.cell_type != "code" or "solution" not in cell.metadata.get("tags", []):
            continue
        asks = "longer_exercise(" in cell.source
        assert asks == (book.LONGER_TAG in cell.metadata["tags"]), cell.source.splitlines()[0]
        if asks:
            assert re.search(r"^RUN = False\b", cell.source, re.MULTILINE), cell.source.splitlines()[0]
            assert book.SKIP_TAG not in cell.metadata["tags"], "its model answer runs in the book"


def test_solutions_check_their_answers():
    """Every solution asserts its answer, or for an open question what can be checked (that runs learned,
    that the cached cells were reused): a solution that only prints cannot fail."""
    without = [f"{p.stem} {c.source.splitlines()[0]}" for p in NOTEBOOKS for c in jupytext.read(p).cells
               if c.cell_type == "code" and "solution" in c.metadata.get("tags", []) and not re.search(r"\bassert|assert_close", c.source)]
    assert without == []
