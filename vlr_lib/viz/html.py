"""Figures as HTML for the static book: a div and the script that draws it with the page's one ``Plotly``.

The book (``vlr_lib.book``, ``make book``) serves plotly.js once, as a local file; every figure and every explorer's
book version (``vlr_lib.widgets._core``) is written with :class:`BookRenderer`, which puts no plotly.js inside and
fetches nothing from a CDN.
"""
from __future__ import annotations

import plotly.io as pio
from plotly.io.base_renderers import MimetypeRenderer

RENDERER = "vlr_book"
PLOTLY_CONFIG = {"responsive": True, "displaylogo": False}


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
