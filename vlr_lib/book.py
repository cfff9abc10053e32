"""The static book's mode: which mode each chapter runs in, and how figures show, when `make book`
executes the notebooks.

`make book` (book/build.py) runs every notebook with ``VLR_BOOK=1``, in the mode :func:`chapter_env` gives it:

- the experiment chapters (:data:`RECORDED_CHAPTERS`, notebooks 09-12) in full mode, so they open the
  full-size records that ship with the workbook (``vlr_lib.train.record``) and show the records'
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
"""
from __future__ import annotations

import re

import plotly.io as pio
from plotly.io.base_renderers import MimetypeRenderer

from ._checks import env_flag

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


def active() -> bool:
    """True while `make book` executes the notebooks (VLR_BOOK=1; read like every on/off variable, _checks.env_flag)."""
    return env_flag(ENV)


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
