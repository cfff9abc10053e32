"""Figures of notebook 02: where the triplet losses send gradient (:func:`gradient_figure`, by
``analysis.loss_gradient``), and Li et al.'s hypersphere picture (:func:`tangent_figure`, from
``analysis.triplet_hn_tangent_norm`` and ``analysis.triplet_hn_descent``)."""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import torch

from .. import analysis, losses, registry
from .._checks import check_choice, check_finite, check_int, check_nonnegative, check_similarity
from ._style import (CURVE, DIVERGING, HARDEST, NEUTRAL, PALETTE, POSITIVE, SEQUENTIAL, SYMBOL, grid, matrix_axes,
                     style, to_numpy)
from .matrix import batch_marks, heatmap_traces

GRADIENT_ZRANGE = (-2.0, 2.0)  # off-diagonal entries of dL/dS lie in {0, 1, 2}; the diagonal saturates
_GRAD_HOVER = "image %{y}, caption %{x}<br>dL/ds = %{z:.3f}<extra></extra>"
_NORM_HOVER = "θ(v, t) %{x:.0f}°, θ(v, t̂) %{y:.0f}°<br>norm %{z:.3f}<extra></extra>"
SIDES = {"same": 0.0, "opposite": math.pi}  # azimuth phi between positive and negative around the anchor
ROLES = {"anchor": (CURVE, "circle", "anchor v"), "positive": (POSITIVE, SYMBOL["positive"], "positive t"),
         "negative": (HARDEST, SYMBOL["hardest"], "hardest negative t̂")}  # colour, marker, legend of each vector


def gradient_figure(S, margin: float = 0.2) -> go.Figure:
    """dL/dS of Triplet over all negatives (left) and of Triplet-SH, VSE++'s max of hinges (right), on one batch.

    Positives sit on the diagonal. Red entries are pushed down by a gradient step, blue ones pulled up; the colour
    scale is clipped to [-2, 2] (hover shows the value). Squares mark positives, triangles the hardest negative of
    each image query (▶, its row) and of each caption query (▼, its column).
    """
    m = check_nonnegative("margin", margin)
    S, _ = check_similarity(torch.as_tensor(to_numpy(S)))
    marks = batch_marks(S)
    panels = {
        f"{registry.label('triplet_all')}, all negatives (Bleeker eq. 3)": lambda X: losses.triplet_all(X, m),
        f"{registry.label('triplet_hardest')}, hardest negative (Li eq. 1)": lambda X: losses.triplet_hardest(X, m),
    }
    titles, grads = [], []
    for name, fn in panels.items():
        grad = analysis.loss_gradient(S, fn).numpy()
        grads.append(grad)
        titles.append(f"{name}<br>L = {float(fn(S)):.3f}, {int((grad != 0).sum())} entries of S get gradient")
    fig = grid(1, 2, titles, height=520)
    for col, grad in enumerate(grads, start=1):
        for tr in heatmap_traces(grad, marks, zrange=GRADIENT_ZRANGE, diverging=True):
            if tr.type == "heatmap":
                tr.update(coloraxis="coloraxis", hovertemplate=_GRAD_HOVER)
            else:
                tr.update(showlegend=col == 1 and tr.showlegend is not False)
            fig.add_trace(tr, row=1, col=col)
    lo, hi = GRADIENT_ZRANGE
    style(fig, f"dL/dS at margin m = {m:.2f}", height=520, subtitle="red: pushed down, blue: pulled up",
          coloraxis=dict(colorscale=DIVERGING, cmin=lo, cmax=hi, cmid=0.0, colorbar=dict(title=dict(text="dL/ds"))))
    matrix_axes(fig, square=False)
    return fig


# --------------------------------------------------------------------------- Li et al. sec. 3.3


def tangent_figure(
    theta_pos: float, theta_neg: float, side: str = "opposite", margin: float = 0.2, n_grid: int = 61
) -> go.Figure:
    """Li et al.'s vanishing gradient of Triplet-SH (their Triplet-HN), for one anchor (eqs. 8-12).

    Left: the unit circle with anchor v, positive t and hardest negative t^, and the tangent parts of the descent
    direction at each (arrow length = norm). Middle and right: the closed-form tangent norms at the anchor (eq. 11)
    and at the negative (eq. 12) over all angle pairs, `analysis.triplet_hn_tangent_norm`; the cross marks the current
    angles, the dashed line is the hinge's edge cos(theta_neg) - cos(theta_pos) + m = 0 (above it, the loss and its
    gradient are 0).
    """
    n_grid = check_int("n_grid", n_grid, 3, 80)
    for name, angle in (("theta_pos", theta_pos), ("theta_neg", theta_neg)):  # polar angles, as the maps' axes
        if not 0.0 <= check_finite(name, angle) <= math.pi:
            raise ValueError(f"{name} must lie in [0, pi] radians, got {angle}")
    phi = SIDES[check_choice("side", side, tuple(SIDES))]
    here = analysis.triplet_hn_tangent_norm(theta_pos, theta_neg, phi, margin=margin)
    sphere = analysis.triplet_hn_descent(theta_pos, theta_neg, phi, margin=margin)
    # Each vector and its descent step in the x-z plane (the picture).
    xz = {r: (getattr(sphere, r).numpy()[[0, 2]], getattr(sphere, f"{r}_step").numpy()[[0, 2]]) for r in ROLES}
    loss = max(0.0, math.cos(theta_neg) - math.cos(theta_pos) + margin)

    deg = np.linspace(0.0, 180.0, n_grid)
    tp, tn = torch.meshgrid(torch.tensor(np.radians(deg)), torch.tensor(np.radians(deg)), indexing="xy")
    norms = analysis.triplet_hn_tangent_norm(tp, tn, phi, margin=margin)  # z[row = theta_neg, col = theta_pos]

    # Three panels of one row hold from 900 px: the circle, then the two maps side by side on shared axes.
    fig = grid(1, 3, [f"L = {loss:.3f}: descent directions", f"anchor: ‖g(v)‖ = {float(here.anchor):.3f}<br>(eq. 11)",
                      f"negative: ‖g(t̂)‖ = {float(here.negative):.3f}<br>(eq. 12)"],
               height=480, column_widths=[0.3, 0.35, 0.35])
    circle = np.linspace(0.0, 2 * math.pi, 121)
    fig.add_trace(go.Scatter(x=np.cos(circle), y=np.sin(circle), mode="lines", line=dict(color=NEUTRAL, width=1),
                             hoverinfo="skip", showlegend=False), row=1, col=1)
    for key, (colour, symbol, label) in ROLES.items():
        (x0, y0), (dx, dy) = xz[key]
        fig.add_trace(go.Scatter(x=[0.0, x0], y=[0.0, y0], mode="lines+markers", name=label,
                                 line=dict(color=colour, width=3),
                                 marker=dict(size=[0, 10], color=colour, symbol=symbol)), row=1, col=1)
        fig.add_trace(go.Scatter(x=[x0, x0 + dx], y=[y0, y0 + dy], mode="lines+markers", name="descent (tangent part)",
                                 showlegend=key == "anchor", legendgroup="arrows",
                                 line=dict(color=PALETTE[0], width=3), hoverinfo="skip",
                                 marker=dict(symbol="arrow", angleref="previous", size=[0, 12], color=PALETTE[0])),
                      row=1, col=1)
    # The hinge's edge: cos(theta_neg) = cos(theta_pos) - m, where it exists.
    c = np.cos(np.radians(deg)) - margin
    ok = c >= -1.0
    edge_y = np.degrees(np.arccos(np.clip(c, -1.0, 1.0)))
    for col, (z, name) in enumerate(((norms.anchor, "anchor"), (norms.negative, "negative")), start=2):
        fig.add_trace(go.Heatmap(x=deg, y=deg, z=z.numpy(), coloraxis="coloraxis", name=name,
                                 hovertemplate=_NORM_HOVER),
                      row=1, col=col)
        fig.add_trace(go.Scatter(x=deg[ok], y=edge_y[ok], mode="lines", line=dict(color="white", dash="dash"),
                                 showlegend=False, hoverinfo="skip"), row=1, col=col)
        fig.add_trace(go.Scatter(x=[math.degrees(theta_pos)], y=[math.degrees(theta_neg)], mode="markers",
                                 marker=dict(symbol="x", size=12, color="white", line=dict(color="black", width=1)),
                                 showlegend=False, hoverinfo="skip"), row=1, col=col)
    where = "the same side of v" if side == "same" else "opposite sides of v"
    style(fig, f"{registry.label('triplet_hardest')} on the unit sphere, margin m = {margin:.2f}", height=480,
          subtitle=f"t and t̂ on {where}",
          coloraxis=dict(colorscale=SEQUENTIAL, cmin=0.0, cmax=2.0, colorbar=dict(title=dict(text="norm"))))
    fig.update_xaxes(range=[-1.25, 1.25], visible=False, row=1, col=1)
    fig.update_yaxes(range=[-1.25, 1.25], visible=False, scaleanchor="x", row=1, col=1)
    for col in (2, 3):
        fig.update_xaxes(title_text="θ(v, t) [deg]", range=[0, 180], row=1, col=col)
        fig.update_yaxes(range=[0, 180], row=1, col=col)
    fig.update_yaxes(title_text="θ(v, t̂) [deg]", row=1, col=2)
    fig.update_yaxes(showticklabels=False, row=1, col=3)  # the same axis as its left neighbour
    return fig
