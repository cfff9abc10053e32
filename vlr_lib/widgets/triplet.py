"""Explorers of notebook 02: where the triplet losses send gradient; Li et al.'s vanishing tangent gradient.

Same convention as `vlr_lib.widgets.evaluation`: each returns a box with `.controls`
and `.figure`; callbacks only call one builder of `vlr_lib.viz.triplet`.
"""
from __future__ import annotations

import math

import ipywidgets as W
import plotly.graph_objects as go

from ..demo import demo_embeddings
from ..similarity import similarity
from ..viz import triplet as V
from ._core import BookView, Explorer, explorer, slider

EASY = 0.3  # the book's easy batch for the gradient explorer: low noise, few violating negatives
SIDES = {"opposite": "opposite sides", "same": "same side"}


def gradient_explorer(n: int = 8, dim: int = 16, noise: float = 2.0, seed: int = 0, margin: float = 0.2) -> Explorer:
    """dL/dS of Triplet (all negatives) and Triplet-HN on a live batch; sliders for margin and noise."""

    def draw(margin: float, noise: float) -> go.Figure:
        img, txt = demo_embeddings(n, dim, noise, seed)
        return V.gradient_figure(similarity(img, txt), margin)

    controls = {
        "margin": slider(W.FloatSlider, "margin m", value=margin, min=0.0, max=1.0, step=0.05),
        "noise": slider(W.FloatSlider, "noise (difficulty)", value=noise, min=0.0, max=3.0, step=0.1),
    }
    # the book: the prose asks for the margin on an easy and a hard batch, and for the noise
    views = [BookView(f"margin m slider, at noise {noise:g}", main="margin"),
             BookView(f"margin m slider, at noise {EASY:g} (an easy batch)", {"noise": EASY}, "margin"),
             BookView(f"noise slider, at m = {margin:g}", main="noise"),
             BookView("noise slider, at m = 0", {"margin": 0.0}, "noise")]
    return explorer(controls, draw, name="triplet-gradient", book_views=views)


def tangent_explorer(
    theta_pos_deg: float = 30.0, theta_neg_deg: float = 20.0, side: str = "opposite", margin: float = 0.2
) -> Explorer:
    """Anchor fixed at the top of the sphere; sliders for the angles to the positive and the hardest negative."""

    def draw(theta_pos: float, theta_neg: float, side: str, margin: float) -> go.Figure:
        return V.tangent_figure(math.radians(theta_pos), math.radians(theta_neg), side, margin)

    controls = {
        "theta_pos": slider(W.FloatSlider, "θ(v, t) [deg]", value=theta_pos_deg, min=0.0, max=180.0, step=1.0),
        "theta_neg": slider(W.FloatSlider, "θ(v, t̂) [deg]", value=theta_neg_deg, min=0.0, max=180.0, step=1.0),
        "side": W.ToggleButtons(options=[(f"t, t̂ on {SIDES['opposite']}", "opposite"), (SIDES["same"], "same")],
                                value=side),
        "margin": slider(W.FloatSlider, "margin m", value=margin, min=0.0, max=1.0, step=0.05),
    }
    # the book: the prose moves θ⁺, then θ⁻, then puts t̂ on t's side (θ⁻ = θ⁺ silences the anchor)
    same, sides = 45.0, SIDES.get(side, side)
    through = tuple((f"{v:g}", float(v)) for v in (0, 15, 30, same, 60, 90, 120, 150, 180))  # passes θ⁻ = θ⁺
    views = [BookView(f"θ⁺ slider, θ⁻ = {theta_neg_deg:g}°, {sides}", main="theta_pos"),
             BookView(f"θ⁻ slider, θ⁺ = {theta_pos_deg:g}°, {sides}", main="theta_neg"),
             BookView(f"θ⁻ slider, θ⁺ = {same:g}°, same side", {"theta_pos": same, "side": "same"}, "theta_neg",
                      grid=through)]
    return explorer(controls, draw, rows=[["theta_pos", "theta_neg"], ["side", "margin"]], name="triplet-tangent",
                    book_views=views)
