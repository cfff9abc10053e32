"""vlr_lib.book: what the notebooks do differently while `make book` executes them (VLR_BOOK=1), which mode
each chapter runs in there, and what a recorded chapter's page must show."""
from __future__ import annotations

from pathlib import Path

import jupytext
import plotly.graph_objects as go
import plotly.io as pio
import pytest
import torch

from vlr_lib import book, notebook
from vlr_lib.viz import html as book_html
from vlr_lib.experiments import record


@pytest.fixture
def renderer():
    before = pio.renderers.default
    yield
    pio.renderers.default = before


def test_book_mode_draws_figures_with_the_pages_plotly(monkeypatch, renderer):
    monkeypatch.setenv("VLR_BOOK", "1")
    monkeypatch.setenv("VLR_DEVICE", "cpu")
    notebook.setup(seed=0)
    assert pio.renderers.default == book_html.RENDERER
    html = go.Figure(go.Scatter(x=[0, 1], y=[1, 0]))._repr_mimebundle_()["text/html"]
    assert "Plotly.newPlot" in html and "plotly-graph-div" in html
    assert len(html) < 20_000 and "cdn.plot.ly" not in html  # neither plotly.js inside nor a CDN


def test_outside_the_book_nothing_changes(monkeypatch, renderer):
    monkeypatch.delenv("VLR_BOOK", raising=False)
    monkeypatch.setenv("VLR_DEVICE", "cpu")
    assert not book.active()
    notebook.setup(seed=0)
    assert pio.renderers.default == notebook.PLOTLY_RENDERER


def test_a_bad_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("VLR_BOOK", "yes please")
    with pytest.raises(ValueError, match="VLR_BOOK must be 0 or 1"):
        book.active()


# --- Which mode each chapter runs in (book.chapter_env), and what a recorded chapter's page must show.

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.py"))


def test_the_recorded_chapters_are_the_notebooks_that_open_records():
    opening = {p.stem for p in NOTEBOOKS if "cfg.use_record" in p.read_text()}
    assert opening == set(book.recorded_chapters())


@pytest.mark.parametrize("stem", [p.stem for p in NOTEBOOKS])
def test_recorded_chapters_run_in_full_mode_from_their_records_the_others_in_fast_mode(stem, monkeypatch, renderer):
    env = book.chapter_env(stem)
    recorded = stem in book.recorded_chapters()
    assert env == {"VLR_FAST": "0" if recorded else "1", "VLR_RERUN": "0", "VLR_DATA": "shapes"}
    for name, value in {**env, "VLR_BOOK": "1", "VLR_DEVICE": "cpu"}.items():
        monkeypatch.setenv(name, value)
    threads = torch.get_num_threads()
    try:
        cfg = notebook.setup(seed=0)
    finally:
        torch.set_num_threads(threads)  # fast mode's setup sets one thread
    assert cfg.use_record == recorded and cfg.fast != recorded
    assert bool(book.FAST_MODE.search(str(cfg))) != recorded  # the settings line says "fast mode" only in fast mode


def test_only_solutions_are_left_unrun_in_the_book():
    """A book-skip cell is shown, not run: only an exercise's solution may be one, never a cell a chapter's
    record, figures or reading depend on."""
    for path in NOTEBOOKS:
        for cell in jupytext.read(path).cells:
            if book.SKIP_TAG in cell.metadata.get("tags", []):
                assert "solution" in cell.metadata["tags"], (path.name, cell.source[:60])


def test_the_record_line_is_what_a_shipped_record_prints():
    for name in ("09_training-shapes-full", "lessons-shapes-full"):
        rec = record.read(name, None)
        assert rec is not None, name
        found = book.RECORD_LINE.search(rec.line())
        assert found and found["name"] == name and found["date"] == rec.manifest["date"][:10]
        assert rec.manifest["hardware"]["cpu"] in found["hardware"]
        assert book.page_problems(f"vlr-workbook settings: full mode\n{rec.line()}\nmore output") == []


@pytest.mark.parametrize("text, problem", [
    ("vlr-workbook settings: full mode, data=shapes\ntrained just now", "shows no record"),
    (("Opened from the record x-full of 2026-11-23 (2-core AMD EPYC, torch 2; 1 min); VLR_RERUN=1 re-trains.\n"
      "vlr-workbook settings: fast mode, data=shapes"), "reports fast mode: 'vlr-workbook settings: fast mode"),
    ("Opened from the record x-full of 2026-11-23 (2-core AMD EPYC, torch 2)\nthe check runs in Fast Mode only",
     "reports fast mode: 'the check runs in Fast Mode only'"),
])
def test_page_problems_name_what_is_missing_or_wrong(text, problem):
    found = book.page_problems(text)
    assert len(found) == 1 and problem in found[0], found
