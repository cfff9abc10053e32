"""Explorer of notebook 03: the temperature of NT-Xent against the weights of one query's negatives.

Same convention as `vlr_lib.widgets.evaluation`: the box exposes `.controls`
(name -> widget) and `.figure` (a plotly FigureWidget); callbacks only call one
builder of `vlr_lib.viz.contrastive`.
"""
from __future__ import annotations

import ipywidgets as W
import plotly.graph_objects as go
from torch import Tensor

from ..viz import contrastive as V
from ._core import explorer, slider


def temperature_explorer(
    S: Tensor, temperature: float = 0.1, query: int = 0, pos_mask: Tensor | None = None, direction: str = "i2t"
) -> W.VBox:
    """Sliders for tau and the query; bars of the query's negative weights (V.negative_weight_bars).

    Under the sliders, a readout of the effective number of negatives
    (V.effective_number of the bars): how many negatives this tau mines.
    """
    n_queries = S.shape[0] if direction == "i2t" else S.shape[1]

    def draw(temperature: float, query: int) -> go.Figure:
        return V.negative_weight_bars(S, temperature, query, pos_mask, direction)

    controls = {
        "temperature": slider(W.FloatLogSlider, "temperature τ", value=temperature, base=10, min=-3, max=1,
                              step=0.05, readout_format=".3g"),
        "query": slider(W.IntSlider, "query", value=query, min=0, max=n_queries - 1),
    }
    box = explorer(controls, draw)
    readout = W.HTML()

    def show_readout(_change=None) -> None:
        shares = box.figure.data[0].y
        readout.value = (f"effective number of negatives: <b>{V.effective_number(shares):.2f}</b> of {len(shares)}"
                         f" &nbsp;·&nbsp; share of the hardest: <b>{max(shares):.3f}</b>")

    for c in controls.values():  # registered after the figure's callback, so it reads the new bars
        c.observe(show_readout, names="value")
    show_readout()
    box.children = (*box.children[:-1], readout, box.figure)
    box.readout = readout
    box.add_class("vlr-explorer-contrastive")
    return box
