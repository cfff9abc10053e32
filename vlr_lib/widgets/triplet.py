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
from ._core import Explorer, explorer, slider


def gradient_explorer(n: int = 8, dim: int = 16, noise: float = 2.0, seed: int = 0, margin: float = 0.2) -> Explorer:
    """dL/dS of Triplet (all negatives) and Triplet-HN on a live batch; sliders for margin and noise."""

    def draw(margin: float, noise: float) -> go.Figure:
        img, txt = demo_embeddings(n, dim, noise, seed)
        return V.gradient_figure(similarity(img, txt), margin)

    controls = {
        "margin": slider(W.FloatSlider, "margin m", value=margin, min=0.0, max=1.0, step=0.05),
        "noise": slider(W.FloatSlider, "noise (difficulty)", value=noise, min=0.0, max=3.0, step=0.1),
    }
    return explorer(controls, draw, name="triplet-gradient")


def tangent_explorer(
    theta_pos_deg: float = 30.0, theta_neg_deg: float = 20.0, side: str = "opposite", margin: float = 0.2
) -> Explorer:
    """Anchor fixed at the top of the sphere; sliders for the angles to the positive and the hardest negative."""

    def draw(theta_pos: float, theta_neg: float, side: str, margin: float) -> go.Figure:
        return V.tangent_figure(math.radians(theta_pos), math.radians(theta_neg), side, margin)

    controls = {
        "theta_pos": slider(W.FloatSlider, "θ(v, t) [deg]", value=theta_pos_deg, min=0.0, max=180.0, step=1.0),
        "theta_neg": slider(W.FloatSlider, "θ(v, t̂) [deg]", value=theta_neg_deg, min=0.0, max=180.0, step=1.0),
        "side": W.ToggleButtons(options=[("t, t̂ on opposite sides", "opposite"), ("same side", "same")], value=side),
        "margin": slider(W.FloatSlider, "margin m", value=margin, min=0.0, max=1.0, step=0.05),
    }
    return explorer(controls, draw, rows=[["theta_pos", "theta_neg"], ["side", "margin"]], name="triplet-tangent")
