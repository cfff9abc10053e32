"""ipywidgets explorers: controls wired to the builders of vlr_lib.viz (thin by design).

Use them as ``from vlr_lib import widgets`` then ``widgets.<topic>.<explorer>(...)``.
Every explorer is built on ``widgets._core.explorer`` and exposes ``.controls``
(name -> widget), ``.figure`` / ``.figures`` and ``.redraw``.
"""
from . import cocos, contrastive, evaluation, goal, lessons, showdown, smooth_ap, softmax, training, triplet, unified

__all__ = ["cocos", "contrastive", "evaluation", "goal", "lessons", "showdown", "smooth_ap", "softmax", "training",
           "triplet", "unified"]
