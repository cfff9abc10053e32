"""Explorer of notebook 08: COCOS counts of the four losses against ε, the margin and the temperatures.

Same convention as `vlr_lib.widgets.evaluation`: the box exposes `.controls`
(name -> widget) and `.figure` (the plotly figure drawn last); callbacks only call
`vlr_lib.viz.cocos.cocos_figure`.
"""
from __future__ import annotations

import ipywidgets as W
from torch import Tensor

from ..analysis import CocosSettings
from ..demo import demo_embeddings
from ..similarity import similarity
from ..viz import cocos as V
from ._core import BookView, Explorer, explorer, slider


def cocos_explorer(
    S: Tensor | None = None,
    settings: CocosSettings = CocosSettings(),
    direction: str = "i2t",
    *,
    n: int = 16,
    dim: int = 16,
    noise: float = 1.5,
    seed: int = 0,
) -> Explorer:
    """Sliders for ε, the triplet margin α, NT-Xent's τ and SmoothAP's τ (from `settings`), and the direction.

    With `S` the explorer counts on that batch. Without it, a demo batch of `n`
    pairs (``demo.demo_embeddings``) gets a `noise` slider too: high noise
    looks like a batch early in training (every query violates), low noise like
    one near convergence.
    """

    def draw(direction: str, noise: float | None = None, **values: float):
        batch = S if S is not None else similarity(*demo_embeddings(n, dim, noise, seed))
        return V.cocos_figure(batch, CocosSettings(**values), direction)

    log = dict(base=10)
    controls = {
        "eps": slider(W.FloatLogSlider, "ε", value=settings.eps, min=-4, max=-0.5, step=0.1, **log),
        "margin": slider(W.FloatSlider, "margin α", value=settings.margin, min=0.0, max=1.0, step=0.05),
        "temperature": slider(W.FloatLogSlider, "NT-Xent τ", value=settings.temperature, min=-2.5, max=0, step=0.1,
                              **log),
        "tau": slider(W.FloatLogSlider, "SmoothAP τ", value=settings.tau, min=-3, max=-0.5, step=0.1, **log),
        "direction": W.ToggleButtons(options=[("image → text", "i2t"), ("text → image", "t2i")], value=direction),
    }
    rows = [["eps", "margin"], ["temperature", "tau"], ["direction"]]
    if S is None:
        controls["noise"] = slider(W.FloatSlider, "batch noise", value=noise, min=0.0, max=4.0, step=0.1)
        rows[-1].append("noise")
    # the book: the prose moves the noise, the margin, ε and NT-Xent's τ, one at a time
    moved = [("noise", "batch noise")] * (S is None) + [("margin", "margin α"), ("eps", "ε"),
                                                          ("temperature", "NT-Xent τ")]
    views = [BookView(f"{label} slider", main=name) for name, label in moved]
    return explorer(controls, draw, rows=rows, name="cocos", book_views=views)
