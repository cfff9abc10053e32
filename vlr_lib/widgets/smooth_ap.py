"""Explorer of notebook 06: the sharpness tau of SmoothAP against the exact AP of one query.

Same convention as `vlr_lib.widgets.evaluation`: the box exposes `.controls` and
`.figure`; callbacks only call one builder of `vlr_lib.viz.smooth_ap`.
"""
from __future__ import annotations

import ipywidgets as W
import plotly.graph_objects as go
from torch import Tensor

from .._checks import check_similarity
from ..viz import smooth_ap as V
from ._core import BookView, Explorer, explorer, slider


def smooth_ap_explorer(S: Tensor, pos_mask: Tensor | None = None, tau: float = 0.01, query: int = 0) -> Explorer:
    """Sliders for tau and the query (a row of S); redraws V.smooth_ap_figure for that row."""
    S, pos = check_similarity(S, pos_mask, both_directions=False)
    is_pos = ~pos.neg

    def draw(tau: float, query: int) -> go.Figure:
        return V.smooth_ap_figure(S[query], is_pos[query], tau)

    controls = {
        "tau": slider(W.FloatLogSlider, "temperature τ", value=tau, base=10, min=-4, max=0, step=0.05),
        "query": slider(W.IntSlider, "query", value=query, min=0, max=S.shape[0] - 1),
    }
    # the book: "pick an image query and move τ"
    views = [BookView(f"temperature τ slider, query {query}", main="tau"),
             BookView(f"query slider, at τ = {tau:g}", main="query")]
    return explorer(controls, draw, name="smooth-ap", book_views=views)
