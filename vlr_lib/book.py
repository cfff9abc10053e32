"""The static book's mode: how figures show when `make book` executes the notebooks.

`make book` (book/build.py) runs every notebook with ``VLR_BOOK=1``. Then:

- plotly figures are written as HTML that calls the page's one ``Plotly`` (the book serves
  plotly.js once, as a local file), instead of JSON that only JupyterLab can draw or HTML that
  fetches plotly.js from a CDN;
- explorers show a plotly-native version of themselves, which needs no kernel
  (``vlr_lib.widgets._core``).

In JupyterLab (VLR_BOOK unset) nothing here is used.
"""
from __future__ import annotations

import os

import plotly.io as pio
from plotly.io.base_renderers import MimetypeRenderer

ENV = "VLR_BOOK"
RENDERER = "vlr_book"
PLOTLY_CONFIG = {"responsive": True, "displaylogo": False}


def active() -> bool:
    """True while `make book` executes the notebooks (VLR_BOOK=1)."""
    value = os.environ.get(ENV, "0").strip().lower()
    if value not in {"0", "1", ""}:
        raise ValueError(f"{ENV} must be 0 or 1, got {value!r}")
    return value == "1"


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
