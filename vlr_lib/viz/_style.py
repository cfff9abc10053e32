"""Shared look and layout of every figure: the colour convention, responsive layout, subplot grids, matrix axes.

Colour convention (one for the whole workbook, safe for colour-blind readers): Okabe & Ito's palette, and a marker
shape for each role so colour is never the only cue --

==================  ==========  ====================  ==============================================
role                constant    colour                marker
==================  ==========  ====================  ==============================================
positive            POSITIVE    blue ``#0072B2``      square (``SYMBOL["positive"]``)
negative            NEGATIVE    orange ``#E69F00``    circle
hardest negative    HARDEST     vermillion ``#D55E00`` diamond; on S a triangle pointing along the
                                                      query: ▶ an image query's row, ▼ a caption
                                                      query's column
==================  ==========  ====================  ==============================================

Gradients dL/dS use the diverging ``DIVERGING`` scale in the same sense: blue (< 0) pulls a similarity up, as a
positive is pulled; red (> 0) pushes it down, as a negative is pushed. Similarities use the sequential ``SEQUENTIAL``
(Viridis). Other series take ``CURVE`` (the curve a figure is about), ``NEUTRAL`` (references) and ``PALETTE`` (runs
and models, the convention's colours last).

Layout: every figure fills the width of its output (no fixed width; `style` sets a height), so it reads from 900 to
1,600 px of notebook width. The title sits under a band kept free for plotly's mode bar, the top margin holds the
title and the panels' titles, legends go under the plot (the bottom margin grows to hold them), colour bars beside
their panels, and no text is under 11 px. tests/browser/test_figure_layout.py measures all of this in Chromium for
every figure.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

POSITIVE = "#0072B2"  # blue: positives
NEGATIVE = "#E69F00"  # orange: negatives
HARDEST = "#D55E00"   # vermillion: hardest negatives
SYMBOL = {"positive": "square", "negative": "circle", "hardest": "diamond",
          "hardest i2t": "triangle-right", "hardest t2i": "triangle-down"}
CURVE = "#000000"     # the curve a figure is about (a loss, a weight) when positives/negatives are drawn too
ACCENT = "#009E73"    # bluish green: the current value, the best configuration
NEUTRAL = "#7f7f7f"   # references: limits, chance, bounds
# Runs, models and other series: Okabe & Ito's colours, the convention's three last (a run is not a negative).
PALETTE = ["#009E73", "#CC79A7", "#56B4E9", "#000000", "#F0E442", "#0072B2", "#E69F00", "#D55E00"]
SEQUENTIAL = "Viridis"
DIVERGING = "RdBu_r"  # gradients: blue pulls a similarity up, red pushes it down

MODEBAR = 30     # px kept free above the title for plotly's mode bar
TITLE_PX, PANEL_PX, FONT_PX = 15, 13, 12  # font sizes: title, panel titles, everything else (>= 11)
LINE = 1.4       # line height / font size
BELOW = dict(orientation="h", x=0.5, xanchor="center", yref="container", y=0.0, yanchor="bottom")
"""The legend under the plot, centred: the bottom margin grows to hold it (plotly's automargin)."""
def lines(text: str | None) -> int:
    """How many lines a plotly text takes (``<br>`` breaks them)."""
    return 0 if not text else 1 + len(re.findall(r"<br\s*/?>", text))


def style(fig: go.Figure, title: str, *, height: int, xaxis: str | None = None, yaxis: str | None = None,
          subtitle: str | None = None, legend: dict | bool = True, **extra) -> go.Figure:
    """The workbook's look on `fig`: full output width, `height` px, the title (and a smaller `subtitle`) under the
    mode bar's band, panel titles above their panels, the legend under the plot, fonts >= 11 px.

    Call it once the panels exist (it measures their titles); axes may be styled afterwards.
    """
    # make_subplots' panel titles: annotations anchored at the bottom, just above a panel (paper coordinates).
    panels = [a for a in fig.layout.annotations
              if a.yref == "paper" and a.yanchor == "bottom" and a.xref == "paper" and a.showarrow is False]
    top_row = max((a.y for a in panels), default=None)
    panel_lines = max((lines(a.text) for a in panels if top_row is not None and a.y >= top_row - 1e-9), default=0)
    for a in panels:  # a little above the panel, clear of its highest tick label
        a.update(font=dict(size=PANEL_PX), yshift=8)
    top = (MODEBAR + lines(title) * TITLE_PX * LINE + lines(subtitle) * FONT_PX * LINE
           + (panel_lines * PANEL_PX * LINE + 14 if panel_lines else 0) + 12)
    base = dict(
        title=dict(text=title, x=0.5, xanchor="center", yref="container", y=1.0, yanchor="top",
                   pad=dict(t=MODEBAR), font=dict(size=TITLE_PX),
                   subtitle=dict(text=subtitle, font=dict(size=FONT_PX)) if subtitle else None),
        template="plotly_white", font=dict(size=FONT_PX), autosize=True, width=None, height=height,
        margin=dict(l=60, r=30, t=math.ceil(top), b=50),
        showlegend=bool(legend),
        legend=(BELOW if legend is True else legend) if legend else None,
    )
    base.update({f"{axis}_title": text for axis, text in (("xaxis", xaxis), ("yaxis", yaxis)) if text is not None})
    base["margin"].update(extra.pop("margin", {}))
    base.update(extra)
    fig.update_layout(**base)
    return fig


def to_numpy(x) -> np.ndarray:
    """Tensors (any device, with grad) and array-likes to a float64 numpy array."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.ascontiguousarray(x, dtype=np.float64)


def symmetric_range(values) -> tuple[float, float]:
    """(-b, b) with b the largest |value|, for a diverging scale centred on 0 (1 when all are 0)."""
    b = float(np.abs(to_numpy(values)).max(initial=0.0))
    return (-b, b) if b > 0 else (-1.0, 1.0)


def fitted_range(values, pad: float = 0.05) -> list[float]:
    """An axis range zoomed to the finite `values`: [min, max] widened by `pad` of the span on each side (of the value
    itself when all are equal), so differences between the values fill the axis."""
    v = to_numpy(values).ravel()
    v = v[np.isfinite(v)]
    if not v.size:
        raise ValueError("values must hold a finite number")
    lo, hi = float(v.min()), float(v.max())
    margin = pad * (hi - lo) if hi > lo else pad * max(abs(hi), 1.0)
    return [lo - margin, hi + margin]


OFF_AXIS = {("x", False): "←", ("x", True): "→", ("y", False): "↓", ("y", True): "↑"}


def level_line(fig: go.Figure, level: float, text: str, axis: str, span: Sequence[float]) -> None:
    """A reference level (chance) on an axis zoomed to the data, whose range is `span`: a dotted line where it lies
    within the span, else a note in a corner on its side ("← chance 31.6, off the axis"), so a level far from the data
    never squashes the data into a few pixels. Call it after `style`. An x-note sits in the corner a ranking leaves
    free (low values: top left, high: bottom right), a y-note on the right, clear of the reference lines' labels (on
    the left)."""
    lo, hi = span
    dotted = dict(line_dash="dot", line_color=NEUTRAL, annotation_text=text)
    if lo <= level <= hi:
        if axis == "x":
            fig.add_vline(x=level, annotation_position="bottom right", **dotted)
        else:
            fig.add_hline(y=level, annotation_position="bottom left", **dotted)
        return
    above = level > hi
    if axis == "x":
        corner = dict(x=1.0, y=0.0) if above else dict(x=0.0, y=1.0)
    else:
        corner = dict(x=1.0, y=float(above))
    fig.add_annotation(xref="paper", yref="paper", **corner, xanchor="right" if corner["x"] else "left",
                       yanchor="top" if corner["y"] else "bottom", showarrow=False, font=dict(color=NEUTRAL),
                       text=f"{OFF_AXIS[axis, above]} {text}, off the axis")


def grid(rows: int, cols: int, titles, *, height: int, column_gap_px: float = 70.0, **kw) -> go.Figure:
    """A subplot grid with the workbook's spacing; titles in reading order.

    Rows are kept apart by room for the x tick labels, an x-axis title and the next row's panel titles (`height` is
    the figure's height, which turns pixels into plotly's fractions); columns by `column_gap_px` at 900 px of width,
    room for the next panel's y tick labels and y-axis title.
    """
    titles = list(titles)
    if rows > 1 and "vertical_spacing" not in kw:
        later = max((lines(t) for t in titles[cols:]), default=0)
        gap = 22 + 24 + later * PANEL_PX * LINE + 20
        kw["vertical_spacing"] = min(0.3, gap / max(height - 160, 100))
    if cols > 1 and "horizontal_spacing" not in kw:
        kw["horizontal_spacing"] = column_gap_px / 810
    return make_subplots(rows, cols, subplot_titles=titles, **kw)


def increasing(name: str, pair: tuple[float, float]) -> tuple[float, float]:
    """`pair` = (lo, hi) with lo < hi (an axis range of a figure), else a ValueError naming it."""
    lo, hi = pair
    if not lo < hi:
        raise ValueError(f"{name} must be increasing, got {pair}")
    return lo, hi


def frame_cell(fig: go.Figure, i: int, j: int, name: str | None = None, **where) -> None:
    """A thick ACCENT frame round cell (row i, column j) of a heatmap (cell j spans j - 0.5 .. j + 0.5)."""
    fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5, line=dict(color=ACCENT, width=4),
                  name=name, **where)


def frame_best(fig: go.Figure, z: np.ndarray, name: str | None = None, **where) -> None:
    """:func:`frame_cell` round the largest finite value of `z` (no frame when none is finite)."""
    if np.isfinite(z).any():
        frame_cell(fig, *np.unravel_index(np.nanargmax(z), z.shape), name=name, **where)


def panels(titles, max_cols: int, *, first_px: int, row_px: int, **kw) -> tuple[go.Figure, int, int]:
    """A :func:`grid` of one panel per title, at most `max_cols` to a row (panels wrap instead of shrinking),
    `first_px` tall with one row and `row_px` more per further row: (figure, cols, height)."""
    titles = list(titles)
    cols = max(1, min(len(titles), max_cols))
    rows = math.ceil(len(titles) / cols)
    height = first_px + row_px * (rows - 1)
    return grid(rows, cols, titles, height=height, **kw), cols, height


def position(k: int, cols: int) -> tuple[int, int]:
    """(row, col), 1-based, of panel k (0-based) in a grid `cols` wide."""
    return k // cols + 1, k % cols + 1


def matrix_axes(fig: go.Figure, row: int | None = None, col: int | None = None, x_title: str | None = "caption j",
                y_title: str | None = "image i", square: bool = True) -> None:
    """Axes of S (and of anything laid out like it): row 0 at the top, square cells unless `square` is False (a wide
    S, a column per caption, keeps the panel's width)."""
    cells = dict(constrain="domain") if square else {}
    fig.update_xaxes(title_text=x_title, row=row, col=col, **cells)
    if square:
        cells["scaleanchor"] = "x" if row is None else fig.get_subplot(row, col).xaxis.plotly_name.replace("axis", "")
    fig.update_yaxes(title_text=y_title, autorange="reversed", row=row, col=col, **cells)
