"""The sealed student edition in JupyterLab and headless Chromium: every student notebook opens without a dialog,
shows no solution, and the file browser offers nothing but the student notebooks.

The folder is written as ``VLR_EDITION=student make lab`` and the student bundle write it (the student notebooks
alone, vlr_lib.book.write_notebook) and served as they serve it: jupytext off (jupyter/lab.py --no-pairing), the
server's own files outside the folder. Nothing is run; each notebook is opened, its kernel waited for, then stopped.

The instructor edition is opened too, as ``make lab`` serves it (jupytext.toml pairing notebooks/NN.ipynb with
NN.py, the .ipynb written after the .py): 02 opens without a dialog. The control: the layout of old, a student
notebook written beside its .py, shows jupytext's "more recent" dialog, so the check above can fail.
One page opens them all, one after another (57 s for the 13 with the server's start, 22 s for the two paired
ones, on this project's 2-core machine at load 5, 2026-11-27).
Skips, saying why, only where Chromium or Playwright is missing.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import time

import jupytext
import nbformat
import pytest

from tests.book.test_editions import solution_problems
from tests.browser import lab
from vlr_lib import book

pytestmark = [pytest.mark.browser, pytest.mark.lab]

SOURCES = sorted(lab.NOTEBOOKS.glob("[0-9][0-9]_*.py"))
NAMES = [f"{py.stem}.ipynb" for py in SOURCES]


@pytest.fixture(scope="module")
def browser_ready():
    if lab.chromium() is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium); .ci/run installs it")
    pytest.importorskip("playwright.async_api", reason="playwright is not installed")


@pytest.fixture(scope="module")
def sealed(browser_ready, tmp_path_factory) -> dict[str, lab.Opened]:
    folder, state = tmp_path_factory.mktemp("student"), tmp_path_factory.mktemp("student-server")
    for py in SOURCES:
        book.write_notebook(str(py), str(folder / f"{py.stem}.ipynb"), "student")
    with lab.lab_server(folder, pairing=False, state=state) as base:
        opened = asyncio.run(lab.open_notebooks(base, NAMES))
    return {o.path: o for o in opened}


@pytest.mark.parametrize("name", NAMES)
def test_a_student_notebook_opens_without_a_dialog_and_without_a_solution(sealed, name):
    opened = sealed[name]
    assert not opened.dialogs, f"{name}: {opened.dialogs}"
    assert not opened.failure, f"{name}: {opened.failure}"
    shown = nbformat.from_dict(opened.notebook)
    assert solution_problems(shown) == [], f"{name} shows a solution"
    expected = book.student_notebook(jupytext.read(lab.NOTEBOOKS / name.replace(".ipynb", ".py")))
    assert [c.source for c in shown.cells] == [c.source for c in expected.cells], "the file, not a paired .py"
    assert sorted(opened.listing) == sorted(NAMES), f"the file browser offers {sorted(opened.listing)}"


@pytest.fixture(scope="module")
def paired(browser_ready, tmp_path_factory) -> dict[str, lab.Opened]:
    """The instructor edition's 02 as make writes it, and 02's student notebook beside its .py (the old layout)."""
    root, state = tmp_path_factory.mktemp("paired"), tmp_path_factory.mktemp("paired-server")
    shutil.copy(lab.ROOT / "jupytext.toml", root)
    py = lab.NOTEBOOKS / "02_triplet_losses.py"
    for folder, edition in (("notebooks", "instructor"), ("old", "student")):
        (root / folder).mkdir()
        source = root / folder / py.name
        shutil.copy(py, source)
        checked_out = time.time() - 600  # the .py from a checkout ten minutes before the notebooks were written
        os.utime(source, (checked_out, checked_out))
        book.write_notebook(str(source), str(source.with_suffix(".ipynb")), edition)
    with lab.lab_server(root, state=state) as base:
        opened = asyncio.run(lab.open_notebooks(base, [f"{f}/02_triplet_losses.ipynb" for f in ("notebooks", "old")]))
    return {o.path.split("/")[0]: o for o in opened}


def test_the_instructor_notebook_opens_without_a_dialog(paired):
    opened = paired["notebooks"]
    assert not opened.dialogs and not opened.failure, f"{opened.dialogs} {opened.failure}"
    assert solution_problems(nbformat.from_dict(opened.notebook)), "the instructor notebook has its solutions"


def test_a_student_notebook_beside_its_py_shows_jupytexts_dialog(paired):
    (dialog,) = paired["old"].dialogs
    assert "File Load Error" in dialog and "is more recent than" in dialog and "Solution 1" in dialog
