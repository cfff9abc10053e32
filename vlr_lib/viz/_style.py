"""Shared look and layout of every figure: colours, layout defaults, matrix axes, subplot grids."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

POSITIVE = "#2ca02c"   # green: positives
NEGATIVE = "#d62728"   # red: (hardest) negatives
NEUTRAL = "#7f7f7f"
SEQUENTIAL = "Viridis"
DIVERGING = "RdBu_r"   # gradients: blue pulls a similarity up, red pushes it down
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
BELOW = dict(orientation="h", y=-0.2)  # the legend under the plot


def layout(title: str, xaxis: str | None = None, yaxis: str | None = None, **extra) -> dict:
    """Layout keyword arguments shared by every figure (template, margins, titles)."""
    base = dict(
        title=dict(text=title, x=0.5),
        template="plotly_white",
        margin=dict(l=60, r=20, t=60, b=50),
        xaxis_title=xaxis,
        yaxis_title=yaxis,
    )
    base.update(extra)
    return base


def to_numpy(x) -> np.ndarray:
    """Tensors (any device, with grad) and array-likes to a float64 numpy array."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.ascontiguousarray(x, dtype=np.float64)


def symmetric_range(values) -> tuple[float, float]:
    """(-b, b) with b the largest |value|, for a diverging scale centred on 0 (1 when all are 0)."""
    b = float(np.abs(to_numpy(values)).max(initial=0.0))
    return (-b, b) if b > 0 else (-1.0, 1.0)


def grid(rows: int, cols: int, titles, **kw) -> go.Figure:
    """A subplot grid with the workbook's spacing; titles in reading order."""
    kw = {"horizontal_spacing": 0.1, "vertical_spacing": 0.14, **kw}
    return make_subplots(rows, cols, subplot_titles=list(titles), **kw)


def matrix_axes(fig: go.Figure, row: int | None = None, col: int | None = None,
                x_title: str | None = None, y_title: str | None = None) -> None:
    """Axes of S (and of anything laid out like it): row 0 at the top, square cells."""
    anchor = "x" if row is None else fig.get_subplot(row, col).xaxis.plotly_name.replace("axis", "")
    fig.update_xaxes(constrain="domain", title_text=x_title, row=row, col=col)
    fig.update_yaxes(autorange="reversed", scaleanchor=anchor, constrain="domain", title_text=y_title,
                     row=row, col=col)
