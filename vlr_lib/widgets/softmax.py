"""Explorers of notebook 05: the partition function of one query (Veit & Wilber Fig. 2) and a global threshold.

Same convention as `vlr_lib.widgets.evaluation`: each box exposes `.controls`
(name -> widget) and `.figure` (the plotly figure drawn last); callbacks only call one
builder of `vlr_lib.viz.softmax`.
"""
from __future__ import annotations

from collections.abc import Mapping

import ipywidgets as W
import plotly.graph_objects as go
from torch import Tensor

from ..viz import softmax as V
from ._core import BookView, Explorer, explorer, slider


def partition_explorer(
    S: Tensor, query: int = 0, k: int = 3, fraction: float = 0.5, scale: float = 20.0
) -> Explorer:
    """Sliders for the query, SNM's per-query k, the batch share of cross-example mining and λ.

    Redraws ``V.partition_figure``: which entries of S enter the softmax of the
    query's positive pair under each of the four losses.
    """
    n = S.shape[0]

    def draw(query: int, k: int, fraction: float, scale: float) -> go.Figure:
        return V.partition_figure(S, query, k, fraction, scale)

    controls = {
        "query": slider(W.IntSlider, "query q", value=query, min=0, max=n - 1),
        "k": slider(W.IntSlider, "SNM: top k per query", value=k, min=1, max=n - 1),
        "fraction": slider(W.FloatSlider, "cross-example mining: batch share", value=fraction, min=0.05, max=1.0,
                           step=0.05),
        "scale": slider(W.FloatLogSlider, "scale λ", value=scale, base=10, min=0, max=1.7, step=0.05),
    }
    # the book: the prose moves the query, k, the batch share and λ, one at a time
    views = [BookView(f"query slider, at k = {k}, share {fraction:g}, λ = {scale:g}", main="query"),
             BookView(f"SNM's k slider, at query {query}", main="k"),
             BookView(f"batch share slider, at query {query}", main="fraction"),
             BookView(f"scale λ slider, at query {query}", main="scale")]
    return explorer(controls, draw, rows=[["query", "scale"], ["k", "fraction"]], name="softmax", book_views=views)


def threshold_explorer(
    results: Mapping[str, tuple[Tensor, Tensor]], threshold: float = 0.3, n_queries: int = 12, direction: str = "t2i"
) -> Explorer:
    """A slider for one global threshold over the per-query score distributions of several models.

    Redraws ``V.query_scores_figure``: the dashed line is the threshold, the
    subplot titles give the precision and recall over all pairs at it.
    """

    def draw(threshold: float, n_queries: int) -> go.Figure:
        return V.query_scores_figure(results, threshold, n_queries, direction)

    controls = {
        "threshold": slider(W.FloatSlider, "global threshold", value=threshold, min=-1.0, max=1.0, step=0.01),
        "n_queries": slider(W.IntSlider, "queries shown", value=n_queries, min=2, max=40),
    }
    return explorer(controls, draw, name="softmax-threshold")
