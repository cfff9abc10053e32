"""The shared look, checked on every figure the notebooks draw (tests/viz/cases.py), in Python.

No fixed width above 900 px (figures fill their output), text of at least 11 px, panel titles that
do not run into each other, and only finite, positive values on log axes. The browser test
(tests/browser/test_figure_layout.py) measures the drawn figures; this one is the fast check.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from tests.viz.cases import static_cases
from tests.widgets.cases import cases
from vlr_lib.viz._style import ACCENT, FONT_PX, frame_best, frame_cell, increasing, matrix_axes, panels

MIN_PX = 11


def all_figures():
    for name, draw in static_cases().items():
        yield name, draw()
    for case in cases():
        for k, fig in enumerate(case.build().figures):
            yield f"{case.notebook} {case.name} [{k}]", fig


FIGURES = dict(all_figures())


def _log_axes(fig) -> set[str]:
    return {key for key in fig.layout.to_plotly_json() if key.startswith(("xaxis", "yaxis"))
            and fig.layout[key].type == "log"}


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_fills_its_output_with_legible_text(name):
    fig = FIGURES[name]
    assert fig.layout.width is None or fig.layout.width <= 900, f"fixed width {fig.layout.width}"
    assert fig.layout.autosize is not False and fig.layout.height and fig.layout.height >= 300
    assert (fig.layout.font.size or 0) >= MIN_PX
    for a in fig.layout.annotations:
        assert a.font.size is None or a.font.size >= MIN_PX, f"annotation {a.text!r} at {a.font.size} px"
    for trace in fig.data:
        size = getattr(getattr(trace, "textfont", None), "size", None)
        assert size is None or np.min(size) >= MIN_PX, f"{trace.name}: text at {size} px"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_panel_titles_of_a_row_do_not_overlap(name):
    """Panel titles on one row, each centred over its panel, fit in their panel's share of 900 px."""
    fig = FIGURES[name]
    panels = [a for a in fig.layout.annotations if a.yref == "paper" and a.yanchor == "bottom" and a.xref == "paper"]
    rows: dict[float, list] = {}
    for a in panels:
        rows.setdefault(round(a.y, 6), []).append(a)
    plot_px = 900 - fig.layout.margin.l - fig.layout.margin.r
    for row in rows.values():
        row.sort(key=lambda a: a.x)
        for left, right in zip(row, row[1:]):
            gap_px = (right.x - left.x) * plot_px
            widest = max(len(line) for a in (left, right) for line in a.text.split("<br>"))
            # half of each title either side of its centre; ~0.55 em per character
            assert widest * 0.55 * (left.font.size or FONT_PX) <= gap_px + 1, \
                f"{left.text!r} and {right.text!r} share {gap_px:.0f} px"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_log_axes_hold_only_finite_positive_values(name):
    fig = FIGURES[name]
    logs = _log_axes(fig)
    for trace in fig.data:
        for axis in ("x", "y"):
            ref = getattr(trace, f"{axis}axis", None) or axis
            key = ref.replace("x", "xaxis", 1) if axis == "x" else ref.replace("y", "yaxis", 1)
            values = getattr(trace, axis, None)
            if key in logs and values is not None:
                v = np.array([np.nan if u is None else u for u in values], dtype=float)
                v = v[~np.isnan(v)]  # gaps are drawn as gaps
                assert np.isfinite(v).all() and (v > 0).all(), f"{trace.name}: {axis} {v[:5]} on a log axis"
    for key in logs:
        rng = fig.layout[key].range
        assert rng is None or (all(map(math.isfinite, rng)) and rng[1] - rng[0] < 40), f"{key} range {rng}"


@pytest.mark.parametrize("n, max_cols, rows, cols", [(1, 3, 1, 1), (3, 3, 1, 3), (5, 3, 2, 3), (4, 2, 2, 2)])
def test_panels_wrap_instead_of_shrinking(n, max_cols, rows, cols):
    fig, got_cols, height = panels([f"p{k}" for k in range(n)], max_cols, first_px=300, row_px=250)
    assert got_cols == cols and height == 300 + 250 * (rows - 1)
    assert len(fig._grid_ref) == rows and len(fig._grid_ref[0]) == cols
    assert [a.text for a in fig.layout.annotations] == [f"p{k}" for k in range(n)]


def test_frames_outline_a_cell_or_the_best_one():
    fig = go.Figure()
    frame_cell(fig, 2, 1, name="selected")
    (shape,) = fig.layout.shapes
    assert (shape.x0, shape.x1, shape.y0, shape.y1, shape.line.color, shape.name) == (0.5, 1.5, 1.5, 2.5, ACCENT,
                                                                                       "selected")
    frame_best(fig, np.array([[1.0, np.nan], [3.0, 2.0]]))
    assert (fig.layout.shapes[1].x0, fig.layout.shapes[1].y0) == (-0.5, 0.5)  # row 1, column 0
    frame_best(fig, np.full((2, 2), np.nan))  # nothing finite: no frame
    assert len(fig.layout.shapes) == 2


def test_increasing_and_matrix_axes():
    assert increasing("x_range", (-1, 0.5)) == (-1, 0.5)
    with pytest.raises(ValueError, match="^x_range must be increasing"):
        increasing("x_range", (0.5, 0.5))
    fig = make_subplots(1, 2)
    matrix_axes(fig, 1, 2)  # square cells, row 0 at the top
    assert (fig.layout.yaxis2.autorange, fig.layout.yaxis2.scaleanchor, fig.layout.xaxis2.title.text) == \
        ("reversed", "x2", "caption j")
    matrix_axes(fig, 1, 1, square=False)  # a wide S keeps its panel's width
    assert fig.layout.yaxis.autorange == "reversed" and fig.layout.yaxis.scaleanchor is None
