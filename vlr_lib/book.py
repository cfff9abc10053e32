"""The static book's mode: which mode each chapter runs in, and how figures show, when `make book`
executes the notebooks.

`make book` (book/build.py) runs every notebook with ``VLR_BOOK=1``, in the mode :func:`chapter_env` gives it:

- the experiment chapters (:data:`RECORDED_CHAPTERS`, notebooks 09-12) in full mode, so they open the
  full-size records that ship with the workbook (``vlr_lib.experiments.record``) and show the records'
  tables, figures and reading; each re-trains one recorded run to check it, as in JupyterLab. Their
  solutions that would train new full-size runs are tagged :data:`SKIP_TAG`: the book shows their code,
  not run, with :data:`SKIPPED_NOTE`. :func:`page_problems` is what the build (and tests/book) checks
  on each of their pages: the record line (name, date, hardware) is there, and nothing reports fast mode;
- every other chapter in fast mode (``VLR_FAST=1``), as the tests run it.

Figures and explorers while the book is built:

- plotly figures are written as HTML that calls the page's one ``Plotly`` (the book serves
  plotly.js once, as a local file), instead of JSON that only JupyterLab can draw or HTML that
  fetches plotly.js from a CDN;
- explorers show a plotly-native version of themselves, which needs no kernel
  (``vlr_lib.widgets._core``).

In JupyterLab (VLR_BOOK unset) nothing here is used.

Two editions (:data:`EDITIONS`, chosen by ``VLR_EDITION``, :func:`edition`): the instructor's, every
notebook as written, and the student's, which :func:`student_notebook` derives from it: every cell tagged
:data:`SOLUTION_TAG` (the solutions' code, their outputs and their written derivations) removed, and each
graded exercise's check cell showing what the unfilled stub scores (``vlr_lib.grading``). ``make book-student``
builds the student book from the instructor book's executed notebooks (no second execution), and ``make lab``
with ``VLR_EDITION=student`` writes the student notebooks (:func:`write_notebook`) into a folder of their own,
``build/student/``, never beside the ``.py`` sources that hold the solutions.

Jupytext pairs ``notebooks/NN_topic.ipynb`` with its ``.py`` (jupytext.toml). When JupyterLab opens either file,
jupytext refuses an ``.ipynb`` more than a second newer than its ``.py`` whose inputs differ ("File Load Error ...
is more recent than ..."), and compares the text forms when the ``.py`` itself is opened as a notebook, where the
header the ``.py`` leaves out already differs. So :func:`write_notebook` gives the ``.py`` the new ``.ipynb``'s
time (what ``jupytext --sync`` does), and a student notebook carries no jupytext metadata: it asks for no ``.py``.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import plotly.io as pio
from plotly.io.base_renderers import MimetypeRenderer

from ._checks import check_choice
from .env import flag

ENV = "VLR_BOOK"
RENDERER = "vlr_book"
PLOTLY_CONFIG = {"responsive": True, "displaylogo": False}
#: The chapters the book shows from their shipped records (full mode); every other chapter runs in fast mode.
RECORDED_CHAPTERS = ("09_training", "10_showdown", "11_hyperparameters", "12_lessons")
#: A cell with this tag is shown in the book but not run there (a solution that would train new full-size runs).
SKIP_TAG = "book-skip"
SKIPPED_NOTE = ("Not run in the book: this solution trains new full-size runs, and the book shows only the recorded "
                "ones. Run the notebook (make lab) to see its answer.\n")
#: The line ``Record.line()`` prints: the record's name, its date and the hardware it was made on.
RECORD_LINE = re.compile(r"Opened from the record (?P<name>\S+) of (?P<date>\d{4}-\d{2}-\d{2}) \((?P<hardware>[^,;]+)")
FAST_MODE = re.compile(r"fast mode", re.IGNORECASE)
#: The book's two editions; the first is the default.
EDITIONS = ("instructor", "student")
EDITION_ENV = "VLR_EDITION"
#: Cells with this tag are an exercise's solution (code, or a Markdown derivation): the student edition drops them.
SOLUTION_TAG = "solution"
GRADED_CHECK = re.compile(r"""grading\.check\(\s*["'](?P<key>\w+)["']""")


def active() -> bool:
    """True while `make book` executes the notebooks (VLR_BOOK=1; read like every on/off variable, env.flag)."""
    return flag(ENV)


def chapter_env(stem: str) -> dict[str, str]:
    """The environment `make book` executes the chapter `stem` (e.g. "09_training") with, besides VLR_BOOK=1:
    a recorded chapter in full mode from its records (VLR_FAST=0, VLR_RERUN=0), any other in fast mode; both
    on the shapes data."""
    recorded = stem in RECORDED_CHAPTERS
    return {"VLR_FAST": "0" if recorded else "1", "VLR_RERUN": "0", "VLR_DATA": "shapes"}


def page_problems(text: str) -> list[str]:
    """What keeps `text`, the outputs of a recorded chapter as the book shows them, from being a page of the
    records: no record line (``Record.line()``: name, date and hardware), or a report of fast mode. Empty when
    the page is sound."""
    found = []
    if not RECORD_LINE.search(text):
        found.append("it shows no record (no 'Opened from the record <name> of <date> (<hardware>' line: a record "
                     "that no longer matches the chapter's settings? make record regenerates them)")
    fast = FAST_MODE.search(text)
    if fast:
        line = text[text.rfind("\n", 0, fast.start()) + 1:].split("\n", 1)[0].strip()
        found.append(f"it reports fast mode: {line[:120]!r}")
    return found


class BookRenderer(MimetypeRenderer):
    """A figure as a div and the script that draws it with the page's ``Plotly`` (no plotly.js inside)."""

    def to_mimebundle(self, fig_dict: dict) -> dict:
        html = pio.to_html(fig_dict, include_plotlyjs=False, include_mathjax=False, full_html=False,
                           default_width="100%", config=PLOTLY_CONFIG, auto_play=False, validate=False)
        return {"text/html": html}


def use_renderer() -> str:
    """Register the book's renderer with plotly and make it the default; returns its name."""
    pio.renderers[RENDERER] = BookRenderer()
    pio.renderers.default = RENDERER
    return RENDERER


def edition(value: str | None = None) -> str:
    """The edition `value` names, or ``$VLR_EDITION`` when it is None (unset or empty: "instructor")."""
    chosen = os.environ.get(EDITION_ENV, "") if value is None else value
    return check_choice(EDITION_ENV if value is None else "edition", chosen.strip() or EDITIONS[0], EDITIONS)


def _stub(*args: object, **kwargs: object) -> None:
    raise NotImplementedError


def student_notebook(nb):
    """A copy of notebook `nb` (nbformat) for the student edition: no cell tagged :data:`SOLUTION_TAG`, and every
    graded check cell's outputs replaced by what it prints while the stub is unfilled (0 points), so a page
    derived from an executed instructor notebook shows no solution's result either."""
    import copy

    import nbformat

    from . import grading

    student = copy.deepcopy(nb)
    student.metadata.pop("jupytext", None)  # it asks jupytext for no .py (make lab turns jupytext off besides)
    student.cells = [c for c in student.cells if SOLUTION_TAG not in c.metadata.get("tags", [])]
    for cell in student.cells:
        found = GRADED_CHECK.search(cell.source) if cell.cell_type == "code" else None
        if found and cell.get("outputs"):
            text = f"{grading.grade(found.group('key'), _stub)}\n"
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    return student


def write_notebook(py: str, out: str, chosen: str | None = None) -> None:
    """Write the jupytext notebook `py` as the .ipynb `out` in edition `chosen` (None: ``$VLR_EDITION``), atomically.

    An instructor notebook written beside its source (``NN.ipynb`` next to ``NN.py``: jupytext's pair) leaves the
    ``.py`` exactly as recent as itself, so jupytext opens either file without its "more recent" dialog and make
    sees the pair as up to date."""
    import jupytext
    import nbformat

    from ._io import atomic_write_text

    nb = jupytext.read(py)
    student = edition(chosen) == "student"
    atomic_write_text(out, nbformat.writes(student_notebook(nb) if student else nb))
    if not student and Path(out).resolve() == Path(py).resolve().with_suffix(".ipynb"):
        written = os.stat(out).st_mtime_ns
        os.utime(py, ns=(os.stat(py).st_atime_ns, written))


if __name__ == "__main__":  # make notebooks: python -m vlr_lib.book NN_topic.py NN_topic.ipynb (edition from $VLR_EDITION)
    import sys

    if len(sys.argv) != 3:
        sys.exit("usage: python -m vlr_lib.book NOTEBOOK.py OUT.ipynb  (VLR_EDITION=instructor|student)")
    write_notebook(sys.argv[1], sys.argv[2])
