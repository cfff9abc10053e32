"""Plotly figure builders: pure functions from numbers to `go.Figure`; they draw, vlr_lib computes.

One module per topic; use them as ``from vlr_lib import viz`` then ``viz.<topic>.<builder>(...)``, e.g.
``viz.goal.weight_surface(cfg)``. Widgets in vlr_lib.widgets only wire controls to these functions; the tests run each
builder over grids of control values, because CI only ever executes a notebook's default slider positions. Shared look
and layout helpers live in ``viz._style``.
"""
from . import (cocos, contrastive, evaluation, goal, lessons, matrix, showdown, smooth_ap, softmax, training, triplet,
               unified)

__all__ = ["cocos", "contrastive", "evaluation", "goal", "lessons", "matrix", "showdown", "smooth_ap",
           "softmax", "training", "triplet", "unified"]
