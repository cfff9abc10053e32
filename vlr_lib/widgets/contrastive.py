"""Explorers of notebook 03: the temperature of NT-Xent against the weights of one query's negatives, and
SigLIP's per-pair weight beside the softmax's.

Same convention as `vlr_lib.widgets.evaluation`: the box exposes `.controls`
(name -> widget) and `.figure` (the plotly figure drawn last); callbacks only call one
builder of `vlr_lib.viz.contrastive`.
"""
from __future__ import annotations

import ipywidgets as W
import plotly.graph_objects as go
from torch import Tensor

from ..viz import contrastive as V
from ._core import BookView, Explorer, explorer, slider


def temperature_explorer(
    S: Tensor, temperature: float = 0.1, query: int = 0, pos_mask: Tensor | None = None, direction: str = "i2t"
) -> Explorer:
    """Sliders for tau and the query; bars of the query's negative weights (V.negative_weight_bars).

    The figure's title reads out the effective number of negatives and the hardest
    negative's share: how many negatives this tau mines.
    """
    n_queries = S.shape[0] if direction == "i2t" else S.shape[1]

    def draw(temperature: float, query: int) -> go.Figure:
        return V.negative_weight_bars(S, temperature, query, pos_mask, direction)

    controls = {
        "temperature": slider(W.FloatLogSlider, "temperature τ", value=temperature, base=10, min=-3, max=1,
                              step=0.05),
        "query": slider(W.IntSlider, "query", value=query, min=0, max=n_queries - 1),
    }
    # the book: "pick a query and move the temperature"
    views = [BookView(f"temperature τ slider, query {query}", main="temperature"),
             BookView(f"query slider, at τ = {temperature:g}", main="query")]
    return explorer(controls, draw, name="contrastive", book_views=views)


def sigmoid_explorer(logit_scale: float = 2.302585092994046, logit_bias: float = -10.0,
                     temperature: float = 0.1) -> Explorer:
    """Sliders for SigLIP's log-scale t' and bias b and NT-Xent's tau; one negative's weight against its similarity
    under both losses (V.sigmoid_weights_figure), with the other negatives easy and hard."""
    def draw(logit_scale: float, logit_bias: float, temperature: float) -> go.Figure:
        return V.sigmoid_weights_figure(logit_scale, logit_bias, temperature)

    controls = {
        "logit_scale": slider(W.FloatSlider, "log-scale t'", value=logit_scale, min=0.0, max=4.6, step=0.1),
        "logit_bias": slider(W.FloatSlider, "bias b", value=logit_bias, min=-15.0, max=5.0, step=0.5),
        "temperature": slider(W.FloatLogSlider, "temperature τ", value=temperature, base=10, min=-2, max=0,
                              step=0.1),
    }
    # the book: the prose moves the bias, then NT-Xent's τ
    views = [BookView("bias b slider", main="logit_bias"), BookView("NT-Xent τ slider", main="temperature"),
             BookView("log-scale t' slider", main="logit_scale")]
    return explorer(controls, draw, name="sigmoid", book_views=views)
