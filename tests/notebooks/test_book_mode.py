"""vlr_lib.book: what the notebooks do differently while `make book` executes them (VLR_BOOK=1)."""
from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio
import pytest

from vlr_lib import book, notebook


@pytest.fixture
def renderer():
    before = pio.renderers.default
    yield
    pio.renderers.default = before


def test_book_mode_draws_figures_with_the_pages_plotly(monkeypatch, renderer):
    monkeypatch.setenv("VLR_BOOK", "1")
    monkeypatch.setenv("VLR_DEVICE", "cpu")
    notebook.setup(seed=0)
    assert pio.renderers.default == book.RENDERER
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
