"""The similarity matrix S of a batch and anything laid out like it (gradients, weights)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ._style import DIVERGING, PALETTE, SEQUENTIAL, layout, to_numpy


def _marks(mask: np.ndarray, name: str, colour: str, symbol: str) -> go.Scatter:
    rows, cols = np.nonzero(mask)
    return go.Scatter(
        x=cols, y=rows, mode="markers", name=name,
        # Open symbols draw their outline in marker.color; a transparent colour hides them.
        marker=dict(symbol=symbol, size=12, color=colour, line=dict(width=2.5)),
        hovertemplate=f"{name}<br>image %{{y}}, caption %{{x}}<extra></extra>",
    )


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
    Z = to_numpy(S)
    if Z.ndim != 2:
        raise ValueError(f"S must be 2-D, got shape {Z.shape}")
    lo, hi = zrange
    if not lo < hi:
        raise ValueError(f"zrange must be increasing, got {zrange}")
    heat = go.Heatmap(
        z=Z, zmin=lo, zmax=hi, colorscale=DIVERGING if diverging else SEQUENTIAL,
        zmid=0.0 if diverging else None, colorbar=dict(title=colorbar_title),
        hovertemplate="image %{y}, caption %{x}<br>value %{z:.3f}<extra></extra>",
    )
    fig = go.Figure(heat)
    symbols = ["square-open", "circle-open", "diamond-open", "x-thin-open", "star-open"]
    for k, (name, mask) in enumerate((marks or {}).items()):
        m = to_numpy(mask).astype(bool)
        if m.shape != Z.shape:
            raise ValueError(f"marks[{name!r}] must have the shape of S {Z.shape}, got {m.shape}")
        fig.add_trace(_marks(m, name, PALETTE[(k + 2) % len(PALETTE)], symbols[k % len(symbols)]))
    fig.update_layout(**layout(title, "caption j", "image i", legend=dict(orientation="h", y=-0.15)))
    fig.update_xaxes(constrain="domain")
    fig.update_yaxes(autorange="reversed", scaleanchor="x", constrain="domain")
    return fig
