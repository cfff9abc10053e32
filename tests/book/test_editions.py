"""The student edition (vlr_lib.book.student_notebook, book/build.py --edition student, make lab with
VLR_EDITION=student): the same chapters with every solution removed -- code, outputs and written derivations --
while the graded exercises' stubs and check cells stay and report 0 points without stopping the notebook.
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
import torch

from vlr_lib import book, grading

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
BUILD = ROOT / "book" / "build.py"
spec = importlib.util.spec_from_file_location("book_build_editions", BUILD)
build = importlib.util.module_from_spec(spec)
sys.modules["book_build_editions"] = build
spec.loader.exec_module(build)

#: What a solution leaves in a page or a notebook: its heading, its code's first line, or its derivation.
SOLUTION_TEXT = re.compile(r"# Solution \d+\.|\*\*Solution \d+, the (derivation|answer)\.\*\*|Solution \d+, the "
                           r"(derivation|answer)\.|Show solution")


def solution_problems(nb) -> list[str]:
    """Every trace of a solution in notebook `nb`: a cell tagged solution, or a solution's text anywhere."""
    found = [f"cell {i} tagged solution" for i, c in enumerate(nb.cells) if "solution" in c.metadata.get("tags", [])]
    for i, cell in enumerate(nb.cells):
        texts = [cell.source] + [json.dumps(o) for o in cell.get("outputs", [])]
        found += [f"cell {i}: {m.group(0)!r}" for t in texts for m in [SOLUTION_TEXT.search(t)] if m]
    return found


@pytest.mark.parametrize("py", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_student_notebook_has_no_solution_and_keeps_everything_else(py):
    nb = jupytext.read(py)
    student = book.student_notebook(nb)
    assert solution_problems(student) == []
    assert solution_problems(nb), "the instructor notebook has its solutions (so the check above can fail)"
    kept = [c.source for c in nb.cells if "solution" not in c.metadata.get("tags", [])]
    assert [c.source for c in student.cells] == kept
    assert len(nb.cells) == len(jupytext.read(py).cells), "the instructor notebook is left as it was"


@pytest.mark.parametrize("key", list(grading.EXERCISES))
def test_the_student_stub_and_its_check_run_and_score_zero(key, capsys):
    """The student notebook's stub cell and check cell, executed: 0 points, no exception."""
    (py,) = (ROOT / "notebooks").glob(f"{key[:2]}_*.py")
    cells = book.student_notebook(jupytext.read(py)).cells
    check = next(i for i, c in enumerate(cells) if f'grading.check("{key}"' in c.source)
    stub = cells[check - 1]
    assert stub.cell_type == "code" and "raise NotImplementedError" in stub.source
    namespace = {"torch": torch, "math": math, "grading": grading}
    exec(stub.source, namespace)
    exec(cells[check].source, namespace)
    out = capsys.readouterr().out
    assert f"{key} (" in out and ": 0 / 5 points, 0/10 hidden cases" in out and "not implemented yet" in out


def test_an_executed_check_cell_shows_what_the_stub_scores():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('grading.check("03_nt_xent", nt_xent);')])
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="03_nt_xent (...): 5 / 5 points")]
    (cell,) = book.student_notebook(nb).cells
    assert "0 / 5 points" in cell.outputs[0]["text"] and "5 / 5" not in cell.outputs[0]["text"]


def test_the_edition_comes_from_vlr_edition_and_a_wrong_one_is_named(monkeypatch):
    monkeypatch.delenv("VLR_EDITION", raising=False)
    assert book.edition() == "instructor"
    monkeypatch.setenv("VLR_EDITION", "student")
    assert book.edition() == "student"
    monkeypatch.setenv("VLR_EDITION", "teacher")
    with pytest.raises(ValueError, match=r"VLR_EDITION must be one of \('instructor', 'student'\), got 'teacher'"):
        book.edition()
    with pytest.raises(ValueError, match="edition must be one of"):
        book.edition("pupil")


def test_make_notebooks_writes_the_student_edition(tmp_path):
    """`python -m vlr_lib.book` (what make's notebook rule runs) with VLR_EDITION=student."""
    py = ROOT / "notebooks" / "02_triplet_losses.py"
    for edition in ("student", "instructor"):
        out = tmp_path / f"{edition}.ipynb"
        env = {"VLR_EDITION": edition, "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
        subprocess.run([sys.executable, "-m", "vlr_lib.book", str(py), str(out)], check=True, env=env, cwd=tmp_path)
        problems = solution_problems(nbformat.read(out, as_version=4))
        assert (problems == []) == (edition == "student")
    bad = subprocess.run([sys.executable, "-m", "vlr_lib.book", str(py), str(tmp_path / "x.ipynb")],
                         env={"VLR_EDITION": "x", "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "VLR_EDITION must be one of" in bad.stderr


CHAPTER = '''# %% [markdown]
# # 02 · A chapter

# %%
import math, torch
from vlr_lib import grading

# %% [markdown]
# ## Exercises
#
# 1. Implement Triplet-SH.

# %%
def triplet_sh(S, margin):
    raise NotImplementedError

# %% [markdown] jupyter={"source_hidden": true} tags=["solution"]
# **Solution 1, the derivation.** The hinge's slope is $\\mathbb{1}[x > 0]$.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 1.
def triplet_sh(S, margin):
    n = S.masked_fill(torch.eye(len(S), dtype=torch.bool), -math.inf)
    d = S.diagonal()
    return torch.relu(margin + n.amax(1) - d).sum() + torch.relu(margin + n.amax(0) - d).sum()
print("the solution ran")

# %%
grading.check("02_triplet_sh", triplet_sh);
'''


def test_the_student_book_is_made_from_the_instructor_builds_notebooks(tmp_path, capsys):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "02_chapter.py").write_text(CHAPTER)
    out = tmp_path / "build"
    assert build.main(["--edition", "student", "--notebooks", str(notebooks), "--out", str(out / "book-student")]) == 1
    assert "no executed notebook for 02_chapter" in capsys.readouterr().err
    assert build.main(["--notebooks", str(notebooks), "--out", str(out / "book"), "--jobs", "1"]) == 0
    assert (out / "book-executed" / "02_chapter.ipynb").is_file()
    assert build.main(["--edition", "student", "--notebooks", str(notebooks), "--out", str(out / "book-student")]) == 0
    instructor = (out / "book" / "notebooks" / "02_chapter.html").read_text()
    student = (out / "book-student" / "notebooks" / "02_chapter.html").read_text()
    for html, solved in ((instructor, True), (student, False)):
        assert ("the solution ran" in html) == solved and ("tag_solution" in html) == solved
        assert ("Show solution" in html) == solved and ("the derivation." in html) == solved
        assert ("5 / 5 points" in html) == solved and ("0 / 5 points" in html) != solved
        assert 'class="reference download internal"' in html
    (download,) = (out / "book-student" / "_downloads").glob("*/02_chapter.ipynb")
    assert solution_problems(nbformat.read(download, as_version=4)) == []
    (download,) = (out / "book" / "_downloads").glob("*/02_chapter.ipynb")
    assert solution_problems(nbformat.read(download, as_version=4))
    index = (out / "book-student" / "index.html").read_text()
    assert "This is the student edition" in index and "instructor edition; the student" not in index


def _paired_copy(tmp_path: Path, py: Path) -> Path:
    """`py` in a folder of `tmp_path` paired by the project's jupytext.toml, as a checkout ten minutes old."""
    (tmp_path / "jupytext.toml").write_text((ROOT / "jupytext.toml").read_text())
    source = tmp_path / "notebooks" / py.name
    source.parent.mkdir(exist_ok=True)
    source.write_text(py.read_text())
    checked_out = source.stat().st_mtime - 600
    os.utime(source, (checked_out, checked_out))
    return source


@pytest.mark.parametrize("py", NOTEBOOKS, ids=lambda p: p.stem)
def test_make_notebooks_instructor_pair_opens_in_jupytext_without_its_dialog(tmp_path, py):
    """Jupytext (JupyterLab's contents manager) refuses a paired .ipynb more recent than its .py when they differ,
    and compares the text forms when the .py is opened as a notebook: make's write leaves the pair opening either
    way, and the .py as recent as the .ipynb (make sees the pair as current), its text untouched."""
    from jupytext import TextFileContentsManager

    source = _paired_copy(tmp_path, py)
    notebook = source.with_suffix(".ipynb")
    book.write_notebook(str(source), str(notebook), "instructor")
    assert source.stat().st_mtime_ns == notebook.stat().st_mtime_ns and source.read_text() == py.read_text()
    contents = TextFileContentsManager(root_dir=str(tmp_path))
    for path in (f"notebooks/{notebook.name}", f"notebooks/{source.name}"):
        model = contents.get(path, type="notebook")
        assert len(model["content"]["cells"]) == len(jupytext.read(py).cells), path


def test_a_student_notebook_beside_its_py_is_what_jupytext_refuses(tmp_path):
    """The control of the test above (and the reason the student notebooks live in a folder of their own)."""
    from jupytext import TextFileContentsManager
    from tornado.web import HTTPError

    source = _paired_copy(tmp_path, ROOT / "notebooks" / "02_triplet_losses.py")
    book.write_notebook(str(source), str(source.with_suffix(".ipynb")), "student")
    with pytest.raises(HTTPError, match=r"(?s)is more recent than.*Solution 1\."):
        TextFileContentsManager(root_dir=str(tmp_path)).get(f"notebooks/{source.stem}.ipynb", type="notebook")


def test_a_student_notebook_pairs_with_nothing():
    nb = jupytext.read(ROOT / "notebooks" / "02_triplet_losses.py")
    assert "jupytext" in nb.metadata and "jupytext" not in book.student_notebook(nb).metadata
