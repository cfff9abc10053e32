"""Figures for SmoothAP (Bleeker & de Rijke eqs. 5-8): AP of a ranking and its sigmoid relaxation.

A query's candidates are a 1-D array of scores with a bool mask of positives. The exact AP is
``vlr_lib.metrics.average_precision``, the smoothed one ``metrics.smooth_average_precision`` (1 - ``losses.smooth_ap``
on the single row), the sigmoid ``losses.smooth_step``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
import torch

from .. import losses, metrics
from .._checks import check_positive
from .readout import readout
from ._style import ACCENT, CURVE, NEGATIVE, NEUTRAL, POSITIVE, SYMBOL, grid, style, to_numpy

__all__ = ["ranking_figure", "smooth_ap_figure"]

DEFAULT_TAUS = tuple(np.logspace(-4, 0, 33))


def _query(scores, is_pos) -> tuple[np.ndarray, np.ndarray, float]:
    """Scores, positive mask and exact AP of one query (checked by vlr_lib.metrics)."""
    ap = metrics.average_precision(scores, is_pos)
    return to_numpy(scores), np.asarray(to_numpy(is_pos), dtype=bool), ap


def ranking_figure(scores, is_pos, title: str = "One query's ranking") -> go.Figure:
    """Bars: the candidates sorted by score, positives blue, negatives orange, precision written at each positive."""
    s, p, ap = _query(scores, is_pos)
    order = np.lexsort((p, -s))  # by score, a tied negative first (the metrics' convention)
    rank = np.arange(1, len(s) + 1)
    hits = np.cumsum(p[order])
    at = p[order]
    fig = go.Figure()
    for sel, name, colour in ((at, "positive", POSITIVE), (~at, "negative", NEGATIVE)):
        fig.add_trace(go.Bar(
            x=rank[sel], y=s[order][sel], marker_color=colour, customdata=order[sel], name=name,
            hovertemplate="rank %{x}<br>candidate %{customdata}<br>s = %{y:.3f}<extra></extra>",
        ))
    fig.add_trace(go.Scatter(
        x=rank[at], y=s[order][at], mode="text", name="precision at the positive", showlegend=False,
        text=[f"{h}/{r}" for h, r in zip(hits[at], rank[at])], textposition="top center",
    ))
    return style(fig, f"{title}: AP = {ap:.4f}", height=400, xaxis="rank", yaxis="score s", barmode="overlay")


def smooth_ap_figure(scores, is_pos, tau: float, taus: Sequence[float] = DEFAULT_TAUS) -> go.Figure:
    """Left: G(x; tau) against the step and this query's score differences; right: SmoothAP vs tau.

    Left: the sigmoid of eq. 7 at `tau`, the indicator it replaces, and a dot for every (positive i, candidate j != i)
    pair at x = s_j - s_i (pairs with a positive blue squares, with a negative orange circles): pairs within a few tau
    of 0 are counted fractionally (and get gradient). Right: SmoothAP of this query over `taus` with the exact AP and
    a marker at `tau`; small tau recovers the exact AP.
    """
    s, p, ap = _query(scores, is_pos)
    taus = np.asarray(sorted(check_positive("taus", float(v)) for v in taus))
    diffs = s[None, :] - s[p][:, None]  # x = s_j - s_i for positive i (rows), candidate j
    not_self = np.ones_like(diffs, dtype=bool)
    not_self[np.arange(p.sum()), np.flatnonzero(p)] = False
    span = max(0.05, float(np.abs(diffs[not_self]).max()) * 1.05)
    x = np.linspace(-span, span, 401)
    sap = metrics.smooth_average_precision(s, p, tau)
    curve = [metrics.smooth_average_precision(s, p, float(v)) for v in taus]
    G = lambda v: losses.smooth_step(torch.as_tensor(v), tau).numpy()  # noqa: E731

    fig = grid(1, 2, ("G(x; τ) replaces 1{x > 0}", "SmoothAP of this query against τ"), height=460,
               column_gap_px=80)
    fig.add_trace(go.Scatter(x=[-span, 0, 0, span], y=[0, 0, 1, 1], name="indicator 1{x > 0}",
                             line=dict(color=NEUTRAL, dash="dash")), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=G(x), name="G(x; τ)", line=dict(color=CURVE, width=3)),
                  row=1, col=1)
    for mask, name, colour, symbol in ((p, "pairs with another positive", POSITIVE, SYMBOL["positive"]),
                                       (~p, "pairs with a negative", NEGATIVE, SYMBOL["negative"])):
        d = diffs[:, mask][not_self[:, mask]]
        fig.add_trace(go.Scatter(x=d, y=G(d), mode="markers", name=name,
                                 marker=dict(color=colour, size=8, symbol=symbol, line=dict(color="black", width=0.5))),
                      row=1, col=1)
    fig.add_trace(go.Scatter(x=taus, y=curve, name="SmoothAP(τ)", line=dict(color=CURVE)), row=1, col=2)
    fig.add_trace(go.Scatter(x=[taus[0], taus[-1]], y=[ap, ap], name="exact AP",
                             line=dict(color=NEUTRAL, dash="dash")), row=1, col=2)
    fig.add_trace(go.Scatter(x=[tau], y=[sap], mode="markers", name="current τ",
                             marker=dict(color=ACCENT, size=12, symbol="diamond", line=dict(color="black", width=1))),
                  row=1, col=2)
    style(fig, f"SmoothAP at τ = {readout(tau)}: {sap:.4f}, exact AP = {ap:.4f}", height=460,
          subtitle=f"one query, {int(p.sum())} positive(s) among {len(s)} candidates")
    fig.update_xaxes(title_text="x = s_j − s_i", row=1, col=1)
    fig.update_yaxes(title_text="G", range=[-0.03, 1.03], row=1, col=1)
    fig.update_xaxes(title_text="temperature τ", type="log", dtick=1, row=1, col=2)  # labels at powers of ten
    fig.update_yaxes(title_text="AP", range=[0.0, 1.03], row=1, col=2)
    return fig
