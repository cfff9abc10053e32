r"""Figures for the unified loss of Li et al.: margin m, scale gamma and the weight of each negative.

Li et al. (eqs. 13-16, gamma written out) differentiate one query's term :math:`\frac{1}{\gamma}\log(1 + \sum_j D_j)`,
:math:`D_j = e^{\gamma(s_{ij} - s_{ii} + m)}`: each negative is pulled down with weight :math:`D_j / (1 + \sum_k
D_k)`. The curves (one negative: ``analysis.unified_one_negative_loss`` / ``_weight``), the live batch's weights
(``analysis.unified_weights``) and gradient (``analysis.loss_gradient``) and the gamma -> infinity limit
(``analysis.unified_limit``) all come from vlr_lib.analysis.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from torch import Tensor

from .. import analysis, losses, registry
from .._checks import check_int
from .readout import readout
from ._style import (CURVE, DIVERGING, HARDEST, NEGATIVE, NEUTRAL, PALETTE, SEQUENTIAL, grid, increasing, matrix_axes,
                     style, to_numpy)
from .matrix import gradient_heatmap

__all__ = ["explorer_figure", "surfaces_figure", "gamma_limit_figure"]

UNIFIED, HARDEST_LOSS, NT_XENT = (registry.label(n) for n in ("unified", "triplet_hardest", "info_nce"))


def explorer_figure(
    S: Tensor, margin: float = 0.2, gamma: float = 60.0, x_range: tuple[float, float] = (-1.0, 0.6)
) -> go.Figure:
    """Left: the weight of a negative against its gap x = s_ij - s_ii; right: dL/dS of a live batch.

    Left curves: one negative at (m, gamma) (eq. 15), its NT-Xent twin (m = 0, eq. 7), and the Triplet-SH limit gamma
    -> inf (a step at x = -m); dots: every negative of the batch `S` with its image->text weight D/(1+sum D), which
    sits below the one-negative curve because the other negatives share the weight. Right: autograd of
    ``losses.unified(S, m, gamma, "sum")``. S must have its positives on the diagonal.
    """
    w_batch = to_numpy(analysis.unified_weights(S, margin, gamma))  # checks S, margin and gamma
    m, g, (lo, hi) = float(margin), float(gamma), increasing("x_range", x_range)
    neg = ~np.eye(len(w_batch), dtype=bool)  # S is square, its positives on the diagonal
    gaps, w_batch, x = to_numpy(S - S.diagonal()[:, None])[neg], w_batch[neg], np.linspace(lo, hi, 241)
    grad = analysis.loss_gradient(S, lambda X: losses.unified(X, m, g, reduction="sum"))
    loss = float(losses.unified(S, m, g))
    hn, vlc = float(losses.triplet_hardest(S, m)), float(losses.info_nce(S, 1.0 / g, "sum")) / g

    fig = grid(1, 2, ("weight of a negative in the gradient", "dL/dS of the live batch"), height=500,
               column_widths=[0.55, 0.45], column_gap_px=90)
    fig.add_trace(go.Scatter(x=x, y=analysis.unified_one_negative_weight(x, m, g).numpy(),
                             name=f"{UNIFIED}, one negative: D/(1+D)", line=dict(color=CURVE, width=3)),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=analysis.unified_one_negative_weight(x, 0.0, g).numpy(),
                             name=f"{NT_XENT} (m = 0), same γ", line=dict(color=PALETTE[3], dash="dot", width=2.5)),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=[lo, -m, -m, hi], y=[0.0, 0.0, 1.0, 1.0], name=f"{HARDEST_LOSS} (γ → ∞)",
                             line=dict(color=HARDEST, dash="dash")), row=1, col=1)
    fig.add_trace(go.Scatter(x=gaps, y=w_batch, mode="markers", name="live batch: each negative, D/(1+ΣD)",
                             marker=dict(color=NEGATIVE, size=7, line=dict(color="black", width=0.5)),
                             hovertemplate="x = %{x:.3f}<br>weight %{y:.3g}<extra></extra>"), row=1, col=1)
    fig.add_traces(gradient_heatmap(grad, {"positive": torch.eye(S.shape[0], dtype=torch.bool)}).data, rows=1, cols=2)
    fig.data[4].colorbar.update(len=0.8)
    style(fig, f"{UNIFIED} loss: margin m = {m:.2f}, scale γ = {readout(g)}", height=500,
          subtitle=f"loss {loss:.3f} ({HARDEST_LOSS} {hn:.3f}, {NT_XENT} / γ {vlc:.3f})")
    fig.update_xaxes(title_text="gap x = s_ij − s_ii", range=[lo, hi], row=1, col=1)
    fig.update_yaxes(title_text="weight of s_ij in dL/dS", range=[-0.03, 1.03], row=1, col=1)
    matrix_axes(fig, 1, 2, square=False)
    return fig


def surfaces_figure(
    margin: float = 0.2,
    x_range: tuple[float, float] = (-1.0, 0.6),
    log10_gamma_range: tuple[float, float] = (0.0, 3.0),
    n: int = 50,
) -> go.Figure:
    """Surfaces over (x = s_ij - s_ii, log10 gamma): the one-negative loss and its weight D/(1+D).

    As gamma grows the loss surface folds into the hinge [x + m]_+ and the weight into a step at x = -m (Triplet-SH,
    eq. 6); for small gamma the weight is a gentle ramp that reaches every negative (NT-Xent-like mining).
    """
    lo, hi = increasing("x_range", x_range)
    g_lo, g_hi = increasing("log10_gamma_range", log10_gamma_range)
    n = check_int("n", n, 2, 80)  # grid points per axis
    x, lg = np.linspace(lo, hi, n), np.linspace(g_lo, g_hi, n)
    X, LG = np.meshgrid(x, lg)
    # the library takes a scalar gamma (and checks margin); a grid of gammas is the same formula row by row
    loss = np.stack([analysis.unified_one_negative_loss(x, margin, 10.0 ** v).numpy() for v in lg])
    weight = np.stack([analysis.unified_one_negative_weight(x, margin, 10.0 ** v).numpy() for v in lg])
    fig = grid(1, 2, ("loss (1/γ) log(1 + D)", "weight D / (1 + D)"), height=520,
               specs=[[{"type": "surface"}, {"type": "surface"}]], horizontal_spacing=0.02)
    fig.add_trace(go.Surface(x=X, y=LG, z=loss, colorscale=SEQUENTIAL, showscale=False, name="loss"), row=1, col=1)
    fig.add_trace(go.Surface(x=X, y=LG, z=weight, colorscale=DIVERGING, showscale=False, name="weight",
                             cmin=0.0, cmax=1.0), row=1, col=2)
    # Seen from a little further than plotly's default, so the axis titles stay inside each panel.
    camera = dict(eye=dict(x=1.9, y=-1.9, z=1.2), center=dict(x=0, y=0, z=-0.15))
    axes = dict(xaxis_title="x = s_ij − s_ii", yaxis_title="log10 γ", camera=camera, aspectmode="cube")
    style(fig, f"{UNIFIED} loss with one negative, m = {margin:.2f}", height=520, legend=False,
          margin=dict(l=10, r=10, b=10))
    fig.update_layout(scene=dict(**axes, zaxis_title="loss"), scene2=dict(**axes, zaxis_title="weight",
                                                                           zaxis=dict(range=[0, 1])))
    return fig


def gamma_limit_figure(S: Tensor, margin: float = 0.2, gammas: Sequence[float] = (1, 10, 100, 1e3, 1e4)) -> go.Figure:
    """unified(S, m, gamma) - triplet_hardest(S, m) against gamma, with the bound 2 P log(N) / gamma.

    Li et al. eq. 6 with a rate, ``analysis.unified_limit``: the gap lies in [0, 2 P log N / γ] for P positive pairs,
    N candidates and two directions. A gap below float64's resolution of the loss (a few ulps of it) is rounding, not
    a measurement: such gammas are not drawn. A dotted line at the resolution and a vertical line at the first gamma
    whose gap falls under it mark where float64 runs out; the y axis spans only what is drawn (no value is clipped to
    an arbitrary floor).
    """
    if len(gammas) < 2:
        raise ValueError("gammas must hold at least two values")
    g, gap, bound, resolution = analysis.unified_limit(S, margin, gammas)
    resolved = gap > resolution
    drawn = np.concatenate([bound, gap[resolved], [resolution]])
    lo, hi = np.log10(drawn.min()) - 0.5, np.log10(drawn.max()) + 0.5
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=g, y=bound, mode="lines", name="bound 2 P log N / γ",
                             line=dict(color=NEUTRAL, dash="dash")))
    fig.add_trace(go.Scatter(x=g[resolved], y=gap[resolved], mode="lines+markers",
                             name=f"{UNIFIED} − {HARDEST_LOSS} (float64)", line=dict(color=CURVE, width=2.5)))
    # Where float64 runs out, as lines with legend entries (annotations misplace on log axes).
    fig.add_trace(go.Scatter(x=[g[0], g[-1]], y=[resolution] * 2, mode="lines", hoverinfo="skip",
                             name=f"float64's resolution of the loss, {resolution:.1e}",
                             line=dict(color=HARDEST, dash="dot", width=1.5)))
    if not resolved.all():
        first = float(g[np.argmax(~resolved)])
        fig.add_trace(go.Scatter(x=[first, first], y=[10 ** lo, 10 ** hi], mode="lines", hoverinfo="skip",
                                 name=f"from γ = {first:.4g} the gap is below it", line=dict(color=HARDEST, width=1.5)))
    style(fig, f"γ → ∞ recovers {HARDEST_LOSS} (Li et al. eq. 6), m = {margin:.2f}", height=460,
          xaxis="scale γ", yaxis="loss gap")
    fig.update_xaxes(type="log", dtick=1)  # ticks at powers of ten only
    fig.update_yaxes(type="log", range=[lo, hi], dtick=2 if hi - lo > 8 else 1, exponentformat="e")
    return fig
