"""The similarity matrix S of a batch and anything laid out like it (gradients, weights)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import torch

from .._checks import check_choice, check_similarity
from ..similarity import DIRECTIONS, hardest_negative_mask
from ._style import (DIVERGING, HARDEST, NEGATIVE, PALETTE, POSITIVE, SEQUENTIAL, SYMBOL, increasing, matrix_axes,
                     style, symmetric_range, to_numpy)

HARDEST_MARKS = {"i2t": "hardest negative of the image (row)", "t2i": "hardest negative of the caption (column)"}
_OTHER_SYMBOLS = ["circle", "star", "x-thin", "hexagon"]


def mark_look(name: str, k: int = 0) -> tuple[str, str]:
    """(colour, symbol) of an outlined cell, by the colour convention of ``viz._style``: positives blue squares,
    hardest negatives vermillion triangles pointing along their query (▶ row, ▼ column), other negatives orange
    circles; any other mark a palette colour (the k-th)."""
    if name.startswith("positive"):
        return POSITIVE, SYMBOL["positive"]
    if "hardest" in name:
        return HARDEST, SYMBOL["hardest t2i" if "column" in name or "caption" in name else "hardest i2t"]
    if name.startswith("negative"):
        return NEGATIVE, SYMBOL["negative"]
    return PALETTE[k % len(PALETTE)], _OTHER_SYMBOLS[k % len(_OTHER_SYMBOLS)]


def mark_traces(mask, name: str, k: int = 0) -> list[go.Scatter]:
    """Outlines of the True cells of `mask`: a white halo under the coloured outline, so it reads on any cell colour."""
    rows, cols = to_numpy(mask).astype(bool).nonzero()
    colour, symbol = mark_look(name, k)
    halo = go.Scatter(x=cols, y=rows, mode="markers", name=name, legendgroup=name, showlegend=False, hoverinfo="skip",
                      marker=dict(symbol=f"{symbol}-open", size=13, color="white", line=dict(width=5)))
    mark = go.Scatter(x=cols, y=rows, mode="markers", name=name, legendgroup=name,
                      marker=dict(symbol=f"{symbol}-open", size=13, color=colour, line=dict(width=2.5)),
                      hovertemplate=f"{name}<br>image %{{y}}, caption %{{x}}<extra></extra>")
    return [halo, mark]


def oriented(S, mask, direction: str) -> tuple:
    """S and a mask laid out like it, both with the queries of `direction` as rows (captions for "t2i")."""
    return (S, mask) if check_choice("direction", direction, DIRECTIONS) == "i2t" else (S.T, mask.T)


def batch_marks(S, pos_mask=None, directions: tuple[str, ...] = DIRECTIONS) -> dict[str, torch.Tensor]:
    """The cells worth outlining on S: its positives and the hardest negative of every query of `directions`
    (``similarity.hardest_negative_mask``, the one the losses and GOAL pick)."""
    S = torch.as_tensor(to_numpy(S))
    _, pos = check_similarity(S, pos_mask, both_directions="t2i" in directions)
    mask = None if pos_mask is None else pos_mask.cpu()
    return {"positive": ~pos.neg, **{HARDEST_MARKS[d]: hardest_negative_mask(S, mask, d) for d in directions}}


def heatmap_traces(
    S, marks: dict[str, object] | None = None, zrange: tuple[float, float] = (-1.0, 1.0),
    diverging: bool = False, colorbar_title: str = "s",
) -> list[go.BaseTraceType]:
    """[heatmap of S, then a halo and an outline trace per mask of `marks`], ready for a figure or a subplot."""
    Z = to_numpy(S)
    if Z.ndim != 2:
        raise ValueError(f"S must be 2-D, got shape {Z.shape}")
    lo, hi = increasing("zrange", zrange)
    traces = [go.Heatmap(
        z=Z, zmin=lo, zmax=hi, colorscale=DIVERGING if diverging else SEQUENTIAL,
        zmid=0.0 if diverging else None, colorbar=dict(title=dict(text=colorbar_title)),
        hovertemplate="image %{y}, caption %{x}<br>value %{z:.3f}<extra></extra>",
    )]
    for k, (name, mask) in enumerate((marks or {}).items()):
        shape = tuple(to_numpy(mask).shape)
        if shape != Z.shape:
            raise ValueError(f"marks[{name!r}] must have the shape of S {Z.shape}, got {shape}")
        traces += mark_traces(mask, name, k)
    return traces


def similarity_heatmap(
    S,
    marks: dict[str, object] | None = None,
    title: str = "Similarity matrix S (rows: images, columns: captions)",
    zrange: tuple[float, float] = (-1.0, 1.0),
    diverging: bool = False,
    colorbar_title: str = "s",
    subtitle: str | None = None,
) -> go.Figure:
    """Heatmap of a matrix shaped like S, with optional outlined cells (and a `subtitle` under the title).

    `marks` maps a legend name to a bool mask of S's shape (e.g. {"positive": eye, "hardest negative of the image
    (row)": hn}); the name picks the look (``mark_look``). `diverging=True` centres the colour scale on zero (for
    gradients dL/dS).
    """
    if not np.isfinite(to_numpy(S)).all():  # plotly would draw a NaN as a gap and clip an inf: a wrong picture
        raise ValueError("S contains NaN or inf; a heatmap would show them as blank or clipped cells")
    fig = go.Figure(heatmap_traces(S, marks, zrange, diverging, colorbar_title))
    style(fig, title, height=520, subtitle=subtitle, legend=bool(marks))
    matrix_axes(fig)
    return fig


def gradient_heatmap(G, marks: dict[str, object] | None = None, title: str = "dL/dS",
                     subtitle: str | None = None) -> go.Figure:
    """dL/dS on a diverging scale symmetric about 0: blue (< 0) pulls a similarity up, red pushes it down."""
    return similarity_heatmap(G, marks, title, zrange=symmetric_range(G), diverging=True, colorbar_title="∂L/∂S",
                              subtitle=subtitle)
