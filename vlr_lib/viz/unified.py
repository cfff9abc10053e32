"""Figures for the unified loss of Li et al.: margin m, scale gamma and the weight of each negative.

Li et al. (eqs. 13-16, gamma written out) differentiate one query's term
:math:`\\frac{1}{\\gamma}\\log(1 + \\sum_j D_j)`, :math:`D_j = e^{\\gamma(s_{ij} - s_{ii} + m)}`:
each negative is pulled down with weight :math:`D_j / (1 + \\sum_k D_k)` (the
:math:`1/\\gamma` cancels the chain rule's gamma). With a single negative this is
:math:`D/(1+D) = \\sigma(\\gamma(x + m))`, x = s_ij - s_ii -- eq. 15 as printed.
The curves and surfaces below use that one-negative case (a plotting helper,
tested against autograd of ``vlr_lib.losses.unified``); the live-batch weights
come from autograd of the library itself.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from .. import losses
from .._checks import check_nonnegative, check_positive, check_similarity
from ._style import DIVERGING, NEGATIVE, NEUTRAL, PALETTE, POSITIVE, SEQUENTIAL, layout, to_numpy
from .contrastive import loss_gradient
from .matrix import similarity_heatmap

__all__ = [
    "one_negative_loss",
    "one_negative_weight",
    "row_weights",
    "explorer_figure",
    "surfaces_figure",
    "gamma_limit_figure",
]


def _gap_grid(x) -> np.ndarray:
    x = to_numpy(x)
    if not np.isfinite(x).all():
        raise ValueError("x must hold finite similarity gaps s_ij - s_ii")
    return x


def one_negative_loss(x, margin: float, gamma: float) -> np.ndarray:
    r"""One query term of the unified loss with a single negative at gap x = s_ij - s_ii.

    :math:`\frac{1}{\gamma}\log(1 + e^{\gamma(x + m)})` (Li et al. eq. 5 / eq. 13 with
    one negative), evaluated as a stable softplus. It is
    :math:`[x + m]_+` within :math:`\log 2/\gamma` (eq. 6) and, with m = 0,
    :math:`1/\gamma` times the NT-Xent term at temperature :math:`1/\gamma` (eq. 7).
    """
    m, g = check_nonnegative("margin", margin), check_positive("gamma", gamma)
    return np.logaddexp(0.0, g * (_gap_grid(x) + m)) / g


def one_negative_weight(x, margin: float, gamma: float) -> np.ndarray:
    r"""d(one_negative_loss)/dx = D/(1+D) = sigmoid(gamma (x + m)) (Li et al. eqs. 15-16)."""
    m, g = check_nonnegative("margin", margin), check_positive("gamma", gamma)
    z = g * (_gap_grid(x) + m)
    return np.exp(-np.logaddexp(0.0, -z))  # 1 / (1 + e^{-z}) without overflow


def row_weights(S: Tensor, margin: float, gamma: float, pos_mask: Tensor | None = None) -> Tensor:
    r"""Image->text weight :math:`D_{ij}/(1 + \sum_k D_{ik})` of every negative (0 at positives).

    The image-query half of the unified loss is an additive-margin softmax:
    :math:`\frac{1}{\gamma}\log(1 + \sum_{j} e^{\gamma(s_{ij} - s_{ii} + m)}) =
    \frac{1}{\gamma}\,\mathrm{CE}(\gamma(S - mI)_i, i)`, so the weights are read off
    autograd of ``losses.sampled_softmax(S - m*pos, scale=gamma, reduction="sum") / gamma``
    (the notebook asserts that this half plus its caption twin is ``losses.unified``).
    """
    m, g = check_nonnegative("margin", margin), check_positive("gamma", gamma)
    S, pos = check_similarity(S, pos_mask, both_directions=False)
    shift = m * (~pos.neg).to(S.dtype)
    grad = loss_gradient(
        S, lambda X: losses.sampled_softmax(X - shift, scale=g, reduction="sum", pos_mask=pos_mask) / g
    )
    return grad.masked_fill(~pos.neg, 0.0)


def _row_gaps(S: Tensor, pos_mask: Tensor | None) -> tuple[np.ndarray, np.ndarray]:
    """x = s_ij - s_ii for every negative of a diagonal batch (row view), and its mask."""
    S, pos = check_similarity(S, pos_mask)
    if not pos.diagonal:
        raise ValueError("pos_mask must be None here: the gap s_ij - s_ii needs one positive per row")
    gaps = S - S.diagonal()[:, None]
    return to_numpy(gaps), to_numpy(pos.neg).astype(bool)


def explorer_figure(
    S: Tensor, margin: float = 0.2, gamma: float = 60.0, x_range: tuple[float, float] = (-1.0, 0.6)
) -> go.Figure:
    """Left: the weight of a negative against its gap x = s_ij - s_ii; right: dL/dS of a live batch.

    Left curves: one negative at (m, gamma) (eq. 15), its VLC twin (m = 0), and the
    Triplet-HN limit gamma -> inf (a step at x = -m); dots: every negative of the
    batch `S` with its image->text weight D/(1+sum D), which sits below the
    one-negative curve because the other negatives share the weight. Right:
    autograd of ``losses.unified(S, m, gamma, "sum")``. S must have its positives
    on the diagonal.
    """
    m, g = check_nonnegative("margin", margin), check_positive("gamma", gamma)
    lo, hi = x_range
    if not lo < hi:
        raise ValueError(f"x_range must be increasing, got {x_range}")
    gaps, neg = _row_gaps(S, None)
    x = np.linspace(lo, hi, 241)
    w_batch = to_numpy(row_weights(S, m, g))[neg]
    grad = loss_gradient(S, lambda X: losses.unified(X, m, g, reduction="sum"))
    loss = float(losses.unified(S, m, g))
    hn, vlc = float(losses.triplet_hardest(S, m)), float(losses.info_nce(S, 1.0 / g, "sum")) / g

    fig = make_subplots(rows=1, cols=2, column_widths=[0.55, 0.45], horizontal_spacing=0.12, subplot_titles=(
        "weight of a negative in the gradient", "dL/dS of the live batch"))
    fig.add_trace(go.Scatter(x=x, y=one_negative_weight(x, m, g), name="unified, one negative: D/(1+D)",
                             line=dict(color=PALETTE[0], width=3)), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=one_negative_weight(x, 0.0, g), name="VLC (m = 0), same γ",
                             line=dict(color=PALETTE[1], dash="dot")), row=1, col=1)
    fig.add_trace(go.Scatter(x=[lo, -m, -m, hi], y=[0.0, 0.0, 1.0, 1.0], name="Triplet-HN (γ → ∞)",
                             line=dict(color=NEGATIVE, dash="dash")), row=1, col=1)
    fig.add_trace(go.Scatter(x=gaps[neg], y=w_batch, mode="markers", name="live batch: D/(1+ΣD)",
                             marker=dict(color=NEUTRAL, size=7, line=dict(color="black", width=0.5)),
                             hovertemplate="x = %{x:.3f}<br>weight %{y:.3g}<extra></extra>"), row=1, col=1)
    bound = float(grad.abs().max().clamp_min(1e-12))
    heat = similarity_heatmap(grad, marks={"positive": torch.eye(S.shape[0], dtype=torch.bool)},
                              zrange=(-bound, bound), diverging=True, colorbar_title="dL/ds")
    for trace in heat.data:
        fig.add_trace(trace, row=1, col=2)
    fig.data[4].colorbar.update(x=1.02, len=0.8)
    title = (f"m = {m:.2f}, γ = {g:.3g}: unified loss {loss:.3f} "
             f"(Triplet-HN {hn:.3f}, VLC/γ {vlc:.3f})")
    fig.update_layout(**layout(title, legend=dict(orientation="h", y=-0.2), height=480))
    fig.update_xaxes(title_text="gap x = s_ij − s_ii", range=[lo, hi], row=1, col=1)
    fig.update_yaxes(title_text="weight of s_ij in dL/dS", range=[-0.03, 1.03], row=1, col=1)
    fig.update_xaxes(title_text="caption j", row=1, col=2)
    fig.update_yaxes(title_text="image i", autorange="reversed", row=1, col=2)
    return fig


def surfaces_figure(
    margin: float = 0.2,
    x_range: tuple[float, float] = (-1.0, 0.6),
    log10_gamma_range: tuple[float, float] = (0.0, 3.0),
    n: int = 50,
) -> go.Figure:
    """Surfaces over (x = s_ij - s_ii, log10 gamma): the one-negative loss and its weight D/(1+D).

    As gamma grows the loss surface folds into the hinge [x + m]_+ and the weight
    into a step at x = -m (Triplet-HN, eq. 6); for small gamma the weight is a
    gentle ramp that reaches every negative (VLC-like mining).
    """
    m = check_nonnegative("margin", margin)
    (lo, hi), (g_lo, g_hi) = x_range, log10_gamma_range
    if not (lo < hi and g_lo < g_hi):
        raise ValueError(f"x_range and log10_gamma_range must be increasing, got {x_range}, {log10_gamma_range}")
    if not 2 <= n <= 80:
        raise ValueError(f"n must be in [2, 80] (grid points per axis), got {n}")
    x, lg = np.linspace(lo, hi, n), np.linspace(g_lo, g_hi, n)
    X, LG = np.meshgrid(x, lg)
    G = 10.0 ** LG
    # one_negative_* take a scalar gamma; a grid of gammas is the same formula row by row
    loss = np.stack([one_negative_loss(x, m, float(g)) for g in G[:, 0]])
    weight = np.stack([one_negative_weight(x, m, float(g)) for g in G[:, 0]])
    fig = make_subplots(rows=1, cols=2, specs=[[{"type": "surface"}, {"type": "surface"}]],
                        subplot_titles=("loss (1/γ) log(1 + D)", "weight D / (1 + D)"))
    fig.add_trace(go.Surface(x=X, y=LG, z=loss, colorscale=SEQUENTIAL, showscale=False, name="loss"), row=1, col=1)
    fig.add_trace(go.Surface(x=X, y=LG, z=weight, colorscale=DIVERGING, showscale=False, name="weight",
                             cmin=0.0, cmax=1.0), row=1, col=2)
    axes = dict(xaxis_title="x = s_ij − s_ii", yaxis_title="log10 γ")
    fig.update_layout(**layout(f"Unified loss with one negative, m = {m:.2f}", height=480))
    fig.update_layout(scene=dict(**axes, zaxis_title="loss"), scene2=dict(**axes, zaxis_title="weight",
                                                                           zaxis=dict(range=[0, 1])))
    return fig


def gamma_limit_figure(S: Tensor, margin: float = 0.2, gammas: Sequence[float] = (1, 10, 100, 1e3, 1e4)) -> go.Figure:
    """unified(S, m, gamma) - triplet_hardest(S, m) against gamma, with the bound 2 P log(N) / gamma.

    Each query term satisfies max(0, max_j γ x_j) <= log(1 + sum_j e^{γ x_j}) <= max(0, max_j γ x_j) + log N
    (N candidates: N - 1 negatives and the 1), so the gap lies in [0, 2 P log N / γ] for
    P positive pairs and two directions: Li et al. eq. 6 with a rate.
    """
    m = check_nonnegative("margin", margin)
    S, pos = check_similarity(S)
    g = np.asarray(sorted(check_positive("gammas", float(v)) for v in gammas))
    if g.size < 2:
        raise ValueError("gammas must hold at least two values")
    hn = float(losses.triplet_hardest(S, m))
    gap = np.array([float(losses.unified(S, m, float(v))) - hn for v in g])
    bound = 2 * pos.count * np.log(S.shape[1]) / g
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=g, y=np.clip(gap, 1e-300, None), mode="lines+markers",
                             name="unified − Triplet-HN", line=dict(color=PALETTE[0])))
    fig.add_trace(go.Scatter(x=g, y=bound, mode="lines", name="bound 2 P log N / γ",
                             line=dict(color=POSITIVE, dash="dash")))
    fig.update_layout(**layout(f"γ → ∞ recovers Triplet-HN (Li et al. eq. 6), m = {m:.2f}", "scale γ",
                               "loss gap", legend=dict(orientation="h", y=-0.2)))
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    return fig
