"""The similarity matrix S of a batch and anything laid out like it (gradients, weights)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import torch

from .._checks import check_similarity
from ..similarity import DIRECTIONS, hardest_negative_mask
from ._style import BELOW, DIVERGING, PALETTE, SEQUENTIAL, layout, matrix_axes, symmetric_range, to_numpy

SYMBOLS = ["square-open", "circle-open", "diamond-open", "x-thin-open", "star-open"]


def _marks(mask: np.ndarray, name: str, colour: str, symbol: str) -> go.Scatter:
    rows, cols = np.nonzero(mask)
    return go.Scatter(
        x=cols, y=rows, mode="markers", name=name,
        # Open symbols draw their outline in marker.color; a transparent colour hides them.
        marker=dict(symbol=symbol, size=12, color=colour, line=dict(width=2.5)),
        hovertemplate=f"{name}<br>image %{{y}}, caption %{{x}}<extra></extra>",
    )


_HARDEST = {"i2t": "hardest negative of the image (row)", "t2i": "hardest negative of the caption (column)"}


def batch_marks(S, pos_mask=None, directions: tuple[str, ...] = DIRECTIONS) -> dict[str, torch.Tensor]:
    """The cells worth outlining on S: its positives and the hardest negative of every query of `directions`
    (``similarity.hardest_negative_mask``, the one the losses and GOAL pick)."""
    S = torch.as_tensor(to_numpy(S))
    _, pos = check_similarity(S, pos_mask, both_directions="t2i" in directions)
    mask = None if pos_mask is None else pos_mask.cpu()
    return {"positive": ~pos.neg, **{_HARDEST[d]: hardest_negative_mask(S, mask, d) for d in directions}}


def heatmap_traces(
    S, marks: dict[str, object] | None = None, zrange: tuple[float, float] = (-1.0, 1.0),
    diverging: bool = False, colorbar_title: str = "s",
) -> list[go.BaseTraceType]:
    """[heatmap of S, one outline trace per mask of `marks`], ready for a figure or a subplot."""
    Z = to_numpy(S)
    if Z.ndim != 2:
        raise ValueError(f"S must be 2-D, got shape {Z.shape}")
    lo, hi = zrange
    if not lo < hi:
        raise ValueError(f"zrange must be increasing, got {zrange}")
    traces = [go.Heatmap(
        z=Z, zmin=lo, zmax=hi, colorscale=DIVERGING if diverging else SEQUENTIAL,
        zmid=0.0 if diverging else None, colorbar=dict(title=colorbar_title),
        hovertemplate="image %{y}, caption %{x}<br>value %{z:.3f}<extra></extra>",
    )]
    for k, (name, mask) in enumerate((marks or {}).items()):
        m = to_numpy(mask).astype(bool)
        if m.shape != Z.shape:
            raise ValueError(f"marks[{name!r}] must have the shape of S {Z.shape}, got {m.shape}")
        traces.append(_marks(m, name, PALETTE[(k + 2) % len(PALETTE)], SYMBOLS[k % len(SYMBOLS)]))
    return traces


def similarity_heatmap(
    S,
    marks: dict[str, object] | None = None,
    title: str = "Similarity matrix S (rows: images, columns: captions)",
    zrange: tuple[float, float] = (-1.0, 1.0),
    diverging: bool = False,
    colorbar_title: str = "s",
) -> go.Figure:
    """Heatmap of a matrix shaped like S, with optional outlined cells.

    `marks` maps a legend name to a bool mask of S's shape (e.g. {"positive": eye,
    "hardest negative": hn}); each gets its own outline symbol. `diverging=True`
    centres the colour scale on zero (for gradients dL/dS).
    """
    fig = go.Figure(heatmap_traces(S, marks, zrange, diverging, colorbar_title))
    fig.update_layout(**layout(title, legend=dict(BELOW, y=-0.15)))
    matrix_axes(fig, x_title="caption j", y_title="image i")
    return fig


def gradient_heatmap(G, marks: dict[str, object] | None = None, title: str = "dL/dS") -> go.Figure:
    """dL/dS on a diverging scale symmetric about 0: blue (< 0) pulls a similarity up, red pushes it down."""
    return similarity_heatmap(G, marks, title, zrange=symmetric_range(G), diverging=True, colorbar_title="∂L/∂S")
