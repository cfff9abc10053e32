"""Figures for SmoothAP (Bleeker & de Rijke eqs. 5-8): AP of a ranking and its sigmoid relaxation.

A query's candidates are a 1-D array of scores with a bool mask of positives.
The smoothed AP comes from the library, ``1 - vlr_lib.losses.smooth_ap`` on the
single row; the exact AP (eqs. 5-6) is computed here for the readout and is
checked in the tests against ``vlr_lib.metrics.map_at_k`` over whole rankings.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from .. import losses
from .._checks import check_positive
from ._style import NEGATIVE, NEUTRAL, PALETTE, POSITIVE, layout, to_numpy

__all__ = ["sigmoid", "exact_ap", "smoothed_ap", "ranking_figure", "smooth_ap_figure"]

DEFAULT_TAUS = tuple(np.logspace(-4, 0, 33))


def sigmoid(x, tau: float) -> np.ndarray:
    r"""G(x; tau) = 1 / (1 + e^{-x/tau}) (Bleeker eq. 7), the smooth stand-in for 1{x > 0}."""
    t = check_positive("tau", tau)
    return np.exp(-np.logaddexp(0.0, -to_numpy(x) / t))  # 1 / (1 + e^{-z}) without overflow


def _query(scores, is_pos) -> tuple[np.ndarray, np.ndarray]:
    s = to_numpy(scores)
    p = np.asarray(to_numpy(is_pos) if isinstance(is_pos, torch.Tensor) else is_pos, dtype=bool)
    if s.ndim != 1 or p.shape != s.shape:
        raise ValueError(f"scores must be 1-D and is_pos of the same shape, got {s.shape} and {p.shape}")
    if not np.isfinite(s).all():
        raise ValueError("scores contains NaN or inf")
    if not (p.any() and (~p).any()):
        raise ValueError("is_pos must mark at least one positive and one negative")
    return s, p


def exact_ap(scores, is_pos) -> float:
    r"""Average precision of one ranking (Bleeker eqs. 5-6): mean over positives of R(i, P) / R(i, Omega).

    R(i, X) = 1 + the number of candidates of X scoring strictly above i (ties
    favour i, the convention of ``vlr_lib.metrics``). With distinct scores this
    is the mean over positives of precision at the positive's rank.
    """
    s, p = _query(scores, is_pos)
    above = s[None, :] > s[p][:, None]  # [n_pos, M]: candidate j strictly above positive i
    return float(np.mean((1 + above[:, p].sum(1)) / (1 + above.sum(1))))


def smoothed_ap(scores, is_pos, tau: float) -> float:
    """SmoothAP of one query (Bleeker eq. 7 in eq. 5): 1 - losses.smooth_ap on the single row."""
    s, p = _query(scores, is_pos)
    row = torch.as_tensor(s, dtype=torch.float64)[None]
    return 1.0 - float(losses.smooth_ap(row, tau, pos_mask=torch.as_tensor(p)[None]))


def ranking_figure(scores, is_pos, title: str = "One query's ranking") -> go.Figure:
    """Bars: the candidates sorted by score, positives green, precision marked at each positive."""
    s, p = _query(scores, is_pos)
    order = np.argsort(-s, kind="stable")
    rank = np.arange(1, len(s) + 1)
    hits = np.cumsum(p[order])
    fig = go.Figure(go.Bar(
        x=rank, y=s[order], marker_color=np.where(p[order], POSITIVE, NEGATIVE),
        customdata=order, name="candidates",
        hovertemplate="rank %{x}<br>candidate %{customdata}<br>s = %{y:.3f}<extra></extra>",
    ))
    at = p[order]
    fig.add_trace(go.Scatter(
        x=rank[at], y=s[order][at], mode="text", name="precision at the positive",
        text=[f"{h}/{r}" for h, r in zip(hits[at], rank[at])], textposition="top center",
    ))
    fig.update_layout(**layout(f"{title}: AP = {exact_ap(s, p):.4f}", "rank", "score s",
                               showlegend=False))
    return fig


def smooth_ap_figure(scores, is_pos, tau: float, taus: Sequence[float] = DEFAULT_TAUS) -> go.Figure:
    """Left: G(x; tau) against the step and this query's score differences; right: SmoothAP vs tau.

    Left: the sigmoid of eq. 7 at `tau`, the indicator it replaces, and a dot for
    every (positive i, candidate j != i) pair at x = s_j - s_i (positives' pairs
    green, negatives' red): pairs within a few tau of 0 are counted fractionally
    (and get gradient). Right: SmoothAP of this query over `taus` with the exact
    AP and a marker at `tau`; small tau recovers the exact AP.
    """
    t = check_positive("tau", tau)
    s, p = _query(scores, is_pos)
    grid = np.asarray(sorted(check_positive("taus", float(v)) for v in taus))
    diffs = s[None, :] - s[p][:, None]  # x = s_j - s_i for positive i (rows), candidate j
    not_self = np.ones_like(diffs, dtype=bool)
    not_self[np.arange(p.sum()), np.flatnonzero(p)] = False
    span = max(0.05, float(np.abs(diffs[not_self]).max()) * 1.05)
    x = np.linspace(-span, span, 401)
    ap, sap = exact_ap(s, p), smoothed_ap(s, p, t)
    curve = [smoothed_ap(s, p, float(v)) for v in grid]

    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("G(x; τ) replaces 1{x > 0}", "SmoothAP of this query against τ"))
    fig.add_trace(go.Scatter(x=[-span, 0, 0, span], y=[0, 0, 1, 1], name="indicator 1{x > 0}",
                             line=dict(color=NEUTRAL, dash="dash")), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=sigmoid(x, t), name="G(x; τ)", line=dict(color=PALETTE[0], width=3)),
                  row=1, col=1)
    for mask, name, colour in ((p, "pairs with another positive", POSITIVE), (~p, "pairs with a negative", NEGATIVE)):
        d = diffs[:, mask][not_self[:, mask]]
        fig.add_trace(go.Scatter(x=d, y=sigmoid(d, t), mode="markers", name=name,
                                 marker=dict(color=colour, size=8, line=dict(color="black", width=0.5))),
                      row=1, col=1)
    fig.add_trace(go.Scatter(x=grid, y=curve, name="SmoothAP(τ)", line=dict(color=PALETTE[0])), row=1, col=2)
    fig.add_trace(go.Scatter(x=[grid[0], grid[-1]], y=[ap, ap], name="exact AP",
                             line=dict(color=POSITIVE, dash="dash")), row=1, col=2)
    fig.add_trace(go.Scatter(x=[t], y=[sap], mode="markers", name="current τ",
                             marker=dict(color=NEGATIVE, size=12, symbol="diamond")), row=1, col=2)
    title = f"τ = {t:.3g}: SmoothAP = {sap:.4f}, exact AP = {ap:.4f} ({int(p.sum())} positive(s))"
    fig.update_layout(**layout(title, legend=dict(orientation="h", y=-0.2), height=450))
    fig.update_xaxes(title_text="x = s_j − s_i", row=1, col=1)
    fig.update_yaxes(title_text="G", range=[-0.03, 1.03], row=1, col=1)
    fig.update_xaxes(title_text="temperature τ", type="log", row=1, col=2)
    fig.update_yaxes(title_text="AP", range=[0.0, 1.03], row=1, col=2)
    return fig
