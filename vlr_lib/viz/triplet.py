"""Figures of notebook 02: where the triplet losses send gradient, and Li et al.'s hypersphere picture.

- `gradient_figure`: dL/dS of `losses.triplet_all` and `losses.triplet_hardest` side by
  side on one batch (Bleeker & de Rijke eqs. 3, 9; Xuan & Chen eq. 4).
- `tangent_figure`: the tangent-gradient norms of Triplet-HN for one anchor
  (Li et al. eqs. 8-12, `analysis.triplet_hn_tangent_norm`) as a 2-D drawing and as
  maps over the two angles.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from .. import analysis, losses
from .._checks import check_choice, check_nonnegative
from ._style import DIVERGING, NEGATIVE, NEUTRAL, POSITIVE, SEQUENTIAL, layout, to_numpy
from .evaluation import hardest_negative_mask, heatmap_traces

GRADIENT_ZRANGE = (-2.0, 2.0)  # off-diagonal entries of dL/dS lie in {0, 1, 2}; the diagonal saturates
_GRAD_HOVER = "image %{y}, caption %{x}<br>dL/ds = %{z:.3f}<extra></extra>"
_NORM_HOVER = "theta+ %{x:.0f} deg, theta- %{y:.0f} deg<br>norm %{z:.3f}<extra></extra>"
SIDES = {"same": 0.0, "opposite": math.pi}  # azimuth phi between positive and negative around the anchor


def loss_and_gradient(S, loss_fn: Callable[[Tensor], Tensor]) -> tuple[float, np.ndarray]:
    """The value of `loss_fn(S)` and its gradient dL/dS (autograd), S as float64."""
    S = torch.as_tensor(to_numpy(S)).requires_grad_()
    loss = loss_fn(S)
    (grad,) = torch.autograd.grad(loss, S)
    return float(loss.detach()), grad.numpy()


def gradient_figure(S, margin: float = 0.2) -> go.Figure:
    """dL/dS of Triplet over all negatives (left) and of Triplet-HN / VSE++ (right) on one batch.

    Positives sit on the diagonal. Red entries are pushed down by a gradient step, blue
    ones pulled up; the colour scale is clipped to [-2, 2] (hover shows the value).
    Squares mark positives, circles the hardest negative of each image query (row),
    diamonds that of each caption query (column).
    """
    m = check_nonnegative("margin", margin)
    Z = to_numpy(S)
    if Z.ndim != 2 or Z.shape[0] != Z.shape[1] or Z.shape[0] < 2:
        raise ValueError(f"S must be a square matrix of at least 2x2, got shape {Z.shape}")
    eye = np.eye(Z.shape[0], dtype=bool)
    marks = {
        "positive": eye,
        "hardest negative of the image (row)": hardest_negative_mask(Z, eye, "i2t"),
        "hardest negative of the caption (column)": hardest_negative_mask(Z, eye, "t2i"),
    }
    panels = {
        "Triplet, all negatives (Bleeker eq. 3)": lambda S: losses.triplet_all(S, m),
        "Triplet-HN, hardest negative (Li eq. 1)": lambda S: losses.triplet_hardest(S, m),
    }
    titles, grads = [], []
    for name, fn in panels.items():
        value, grad = loss_and_gradient(Z, fn)
        grads.append(grad)
        titles.append(f"{name}<br>L = {value:.3f}, {int((grad != 0).sum())} entries of S get gradient")
    fig = make_subplots(1, 2, subplot_titles=titles, horizontal_spacing=0.08)
    for col, grad in enumerate(grads, start=1):
        for tr in heatmap_traces(grad, marks, zrange=GRADIENT_ZRANGE, diverging=True):
            if tr.type == "heatmap":
                tr.update(coloraxis="coloraxis", hovertemplate=_GRAD_HOVER)
            else:
                tr.update(legendgroup=tr.name, showlegend=col == 1)
            fig.add_trace(tr, row=1, col=col)
    lo, hi = GRADIENT_ZRANGE
    fig.update_layout(
        **layout(
            f"dL/dS at margin m = {m:.2f} (red: pushed down, blue: pulled up)",
            height=500, width=1000, margin=dict(l=60, r=20, t=110, b=50),
            coloraxis=dict(colorscale=DIVERGING, cmin=lo, cmax=hi, cmid=0.0, colorbar=dict(title="dL/ds")),
            legend=dict(orientation="h", y=-0.15), title_font=dict(size=14),
        )
    )
    fig.update_annotations(font_size=12)
    fig.update_xaxes(title_text="caption j")
    fig.update_yaxes(title_text="image i", autorange="reversed")
    return fig


# --------------------------------------------------------------------------- Li et al. sec. 3.3


def _check_angle(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number (radians), got {type(value).__name__}")
    if not 0.0 <= value <= math.pi:
        raise ValueError(f"{name} must lie in [0, pi] radians, got {value}")
    return float(value)


def sphere_points(theta_pos: float, theta_neg: float, side: str = "opposite") -> dict[str, np.ndarray]:
    """2-D coordinates of Li et al.'s Fig. 2: anchor v at the top of the unit circle,
    positive t at angle `theta_pos` to its right, hardest negative t^ at angle `theta_neg`
    on the same side as t or on the opposite side."""
    theta_pos, theta_neg = _check_angle("theta_pos", theta_pos), _check_angle("theta_neg", theta_neg)
    sign = 1.0 if check_choice("side", side, tuple(SIDES)) == "same" else -1.0
    return {
        "anchor": np.array([0.0, 1.0]),
        "positive": np.array([math.sin(theta_pos), math.cos(theta_pos)]),
        "negative": np.array([sign * math.sin(theta_neg), math.cos(theta_neg)]),
    }


def descent_arrows(
    theta_pos: float, theta_neg: float, side: str = "opposite", margin: float = 0.2
) -> dict[str, np.ndarray]:
    """Tangent parts of minus the Triplet-HN gradient at v, t^ and t (the green arrows of Li et al. Fig. 2).

    Raw gradients (Li et al. eqs. 9-10): dL/dv = t^ - t, dL/dt^ = v, dL/dt = -v when the
    hinge is active, else 0. Each is projected on the tangent plane at its point x:
    g - (g.x) x; the arrows point the way a gradient step moves the point.
    """
    m = check_nonnegative("margin", margin)
    p = sphere_points(theta_pos, theta_neg, side)
    v, t, tn = p["anchor"], p["positive"], p["negative"]
    active = float(v @ tn - v @ t + m > 0)

    def tangent(g: np.ndarray, x: np.ndarray) -> np.ndarray:
        return g - (g @ x) * x

    return {
        "anchor": -active * tangent(tn - t, v),
        "negative": -active * tangent(v, tn),
        "positive": -active * tangent(-v, t),
    }


def tangent_figure(
    theta_pos: float, theta_neg: float, side: str = "opposite", margin: float = 0.2, n_grid: int = 61
) -> go.Figure:
    """Li et al.'s vanishing gradient of Triplet-HN, for one anchor (eqs. 8-12).

    Left: the unit circle with anchor v, positive t and hardest negative t^, and the
    tangent parts of the descent direction at each (arrow length = norm). Middle and
    right: the closed-form tangent norms at the anchor (eq. 11) and at the negative
    (eq. 12) over all angle pairs, `analysis.triplet_hn_tangent_norm`; the cross marks
    the current angles, the dashed line is the hinge's edge cos(theta_neg) - cos(theta_pos)
    + m = 0 (above it, the loss and its gradient are 0).
    """
    m = check_nonnegative("margin", margin)
    if isinstance(n_grid, bool) or not isinstance(n_grid, int) or not 3 <= n_grid <= 80:
        raise ValueError(f"n_grid must be an int in [3, 80], got {n_grid!r}")
    pts = sphere_points(theta_pos, theta_neg, side)
    arrows = descent_arrows(theta_pos, theta_neg, side, m)
    phi = SIDES[side]
    here = analysis.triplet_hn_tangent_norm(theta_pos, theta_neg, phi, margin=m)
    loss = max(0.0, math.cos(theta_neg) - math.cos(theta_pos) + m)

    deg = np.linspace(0.0, 180.0, n_grid)
    tp, tn = torch.meshgrid(torch.tensor(np.radians(deg)), torch.tensor(np.radians(deg)), indexing="xy")
    grid = analysis.triplet_hn_tangent_norm(tp, tn, phi, margin=m)  # z[row = theta_neg, col = theta_pos]

    fig = make_subplots(
        1, 3, column_widths=[0.3, 0.35, 0.35], horizontal_spacing=0.09,
        subplot_titles=[
            f"L = {loss:.3f}; descent directions",
            f"anchor ||g(v)|| = {float(here.anchor):.3f} (eq. 11)",
            f"negative ||g(t^)|| = {float(here.negative):.3f} (eq. 12)",
        ],
    )
    circle = np.linspace(0.0, 2 * math.pi, 121)
    fig.add_trace(go.Scatter(x=np.cos(circle), y=np.sin(circle), mode="lines", line=dict(color=NEUTRAL, width=1),
                             hoverinfo="skip", showlegend=False), row=1, col=1)
    colours = {"anchor": "#1f77b4", "positive": POSITIVE, "negative": NEGATIVE}
    labels = {"anchor": "anchor v", "positive": "positive t", "negative": "hardest negative t^"}
    for key in ("anchor", "positive", "negative"):
        x0, y0 = pts[key]
        x1, y1 = pts[key] + arrows[key]
        fig.add_trace(go.Scatter(x=[0.0, x0], y=[0.0, y0], mode="lines+markers", name=labels[key],
                                 line=dict(color=colours[key], width=3), marker=dict(size=[0, 9], color=colours[key])),
                      row=1, col=1)
        fig.add_trace(go.Scatter(x=[x0, x1], y=[y0, y1], mode="lines+markers", name="descent (tangent part)",
                                 showlegend=key == "anchor", legendgroup="arrows",
                                 line=dict(color="#17becf", width=3), hoverinfo="skip",
                                 marker=dict(symbol="arrow", angleref="previous", size=[0, 12], color="#17becf")),
                      row=1, col=1)
    # The hinge's edge: cos(theta_neg) = cos(theta_pos) - m, where it exists.
    c = np.cos(np.radians(deg)) - m
    ok = c >= -1.0
    edge_y = np.degrees(np.arccos(np.clip(c, -1.0, 1.0)))
    for col, (z, name) in enumerate(((grid.anchor, "anchor"), (grid.negative, "negative")), start=2):
        fig.add_trace(go.Heatmap(x=deg, y=deg, z=z.numpy(), coloraxis="coloraxis", name=name,
                                 hovertemplate=_NORM_HOVER),
                      row=1, col=col)
        fig.add_trace(go.Scatter(x=deg[ok], y=edge_y[ok], mode="lines", line=dict(color="white", dash="dash"),
                                 showlegend=False, hoverinfo="skip"), row=1, col=col)
        fig.add_trace(go.Scatter(x=[math.degrees(theta_pos)], y=[math.degrees(theta_neg)], mode="markers",
                                 marker=dict(symbol="x", size=12, color="white", line=dict(color="black", width=1)),
                                 showlegend=False, hoverinfo="skip"), row=1, col=col)
    fig.update_layout(
        **layout(
            f"Triplet-HN on the unit sphere, margin m = {m:.2f}, t and t^ on "
            + ("the same side of v" if side == "same" else "opposite sides of v"),
            height=450, width=1100, margin=dict(l=40, r=20, t=90, b=50),
            legend=dict(orientation="h", y=-0.18), title_font=dict(size=14),
            coloraxis=dict(colorscale=SEQUENTIAL, cmin=0.0, cmax=2.0, colorbar=dict(title="norm")),
        )
    )
    fig.update_annotations(font_size=12)
    fig.update_xaxes(range=[-1.25, 1.25], visible=False, row=1, col=1)
    fig.update_yaxes(range=[-1.25, 1.25], visible=False, scaleanchor="x", row=1, col=1)
    for col in (2, 3):
        fig.update_xaxes(title_text="theta(v, t) [deg]", range=[0, 180], row=1, col=col)
        fig.update_yaxes(title_text="theta(v, t^) [deg]", range=[0, 180], row=1, col=col)
    return fig
