"""The built student edition (`make book-student`, build/book-student or $VLR_BOOK_STUDENT_DIR) contains no
solution: no cell tagged solution, no "Show solution", no solution's code, output or derivation, in any chapter
page or in the notebook each chapter offers for download; its graded exercises show the unfilled stub's 0 points.

Without a built student book the tests skip, saying so; `make test-book-student` (CI, after `make book-student`)
sets VLR_BOOK_STUDENT_DIR, so there a missing book fails.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest

from vlr_lib import grading

from .test_editions import SOLUTION_TEXT, solution_problems

ROOT = Path(__file__).resolve().parents[2]
BOOK = Path(os.environ.get("VLR_BOOK_STUDENT_DIR") or ROOT / "build" / "book-student")
CHAPTERS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


@pytest.fixture(scope="module")
def student_book() -> Path:
    if not (BOOK / "index.html").is_file():
        if os.environ.get("VLR_BOOK_STUDENT_DIR"):
            pytest.fail(f"no built student book in {BOOK}: run make book-student first")
        pytest.skip(f"no built student book in {BOOK} (make book-student builds it)")
    return BOOK


@pytest.mark.parametrize("stem", CHAPTERS)
def test_a_chapter_page_has_no_solution(student_book, stem):
    html = (student_book / "notebooks" / f"{stem}.html").read_text(encoding="utf-8")
    assert "tag_solution" not in html and "tag_hide-cell" not in html
    found = SOLUTION_TEXT.search(html)
    assert found is None, f"{stem}: {found.group(0)!r}"
    for key in (k for k in grading.EXERCISES if k[:2] == stem[:2]):
        assert re.search(rf"{key} \([^)]*\): 0 / 5 points, 0/10 hidden cases", html), f"{stem}: {key} shows 0 points"


@pytest.mark.parametrize("stem", CHAPTERS)
def test_the_notebook_a_chapter_offers_has_no_solution(student_book, stem):
    html = (student_book / "notebooks" / f"{stem}.html").read_text(encoding="utf-8")
    link = re.search(rf'class="reference download internal" download="" href="([^"]+/{stem}\.ipynb)"', html)
    assert link, f"{stem}: no download button"
    nb = nbformat.read(student_book / "notebooks" / link.group(1), as_version=4)
    assert solution_problems(nb) == []
    assert any("## Exercises" in c.source for c in nb.cells), "the exercises are there"


def test_no_page_of_the_student_book_has_a_solution_cell(student_book):
    pages = sorted(student_book.rglob("*.html"))
    assert len(pages) > len(CHAPTERS)
    assert [p.name for p in pages if "tag_solution" in p.read_text(encoding="utf-8")] == []
    course = (student_book / "docs" / "course.html").read_text(encoding="utf-8")
    assert "Quiz bank" not in course and "Rubric" not in course, "the instructor's guide stays out of it"
