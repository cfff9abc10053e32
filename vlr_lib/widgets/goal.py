"""Explorers of GOAL (Xuan & Chen, sec. 3): controls wired to the builders of vlr_lib.viz.goal.

Built on `widgets._core.explorer` like every explorer: the box exposes `.controls`
(name -> widget) and `.figures`, so tests and readers can drive it without a
browser: set ``box.controls["tau"].value = 20`` and the figures follow.
"""
from __future__ import annotations

import ipywidgets as W
import plotly.graph_objects as go
from torch import Tensor

from .. import goal
from ..goal import GoalConfig
from ..demo import demo_embeddings
from ..similarity import similarity
from ..viz import goal as V
from ._core import BookView, Explorer, explorer, slider

__all__ = ["triplet_explorer", "pair_weight_explorer", "goal_composer"]

_TRIPLET_OPTIONS = [("T^con (triplet loss, eq. 5)", "con"), ("T^nca (NCA, eq. 7)", "nca"),
                    ("T^cir (Circle, eq. 8)", "cir")]
_PAIR_OPTIONS = [("P^con (constant, eq. 9)", "con"), ("P^lin (Circle, eq. 10)", "lin"),
                 ("P^sig (binomial deviance, eq. 11)", "sig"), ("P^lin-ms (linear MS, eq. 13)", "lin-ms"),
                 ("P^sig-ms (MS loss, eq. 12)", "sig-ms")]
_MS_FORM_OPTIONS = [("MS loss's own weights (<= 1)", "ms-loss"), ("eq. 12 as printed", "printed")]


def _sliders(cfg: GoalConfig, names: tuple[str, ...]) -> dict[str, W.Widget]:
    """The parameter sliders of a GoalConfig's fields (same ranges in every GOAL explorer)."""
    spec = {"margin": ("margin m", 0.0, 1.0, 0.05), "tau": ("scale τ", 1.0, 50.0, 1.0),
            "alpha": ("α", 0.5, 10.0, 0.5),
            "beta": ("β", 1.0, 50.0, 1.0), "lam": ("λ", -1.0, 1.0, 0.05)}
    return {k: slider(W.FloatSlider, spec[k][0], value=getattr(cfg, k), min=spec[k][1], max=spec[k][2],
                      step=spec[k][3]) for k in names}


def _rel_slider(rel: float, description: str = "MS term m") -> W.Widget:
    return slider(W.FloatSlider, description, value=rel, min=0.05, max=2.0, step=0.05)


def triplet_explorer(margin: float = 0.2, tau: float = 10.0, n: int = 61) -> Explorer:
    """Fig. 2 with knobs: the margin m of T^con and the scale τ of T^nca and T^cir."""

    def draw(margin: float, tau: float) -> go.Figure:
        return V.triplet_diagrams(margin, tau, n)

    # the book: "a larger τ sharpens both soft steps; the margin moves the cliff"
    views = [BookView(f"margin m slider, at τ = {tau:g}", main="margin"),
             BookView(f"scale τ slider, at m = {margin:g}", main="tau")]
    return explorer(_sliders(GoalConfig(margin=margin, tau=tau), ("margin", "tau")), draw, name="goal-triplet",
                    book_views=views)


def pair_weight_explorer(alpha: float = 2.0, beta: float = 10.0, lam: float = 0.5, rel: float = 0.1) -> Explorer:
    """Fig. 3 with knobs: α, β, λ of the sigmoid forms and the MS relative term m."""
    controls = {**_sliders(GoalConfig(alpha=alpha, beta=beta, lam=lam), ("alpha", "beta", "lam")),
                "rel": _rel_slider(rel)}
    return explorer(controls, V.pair_weight_curves, name="goal-pair")


def goal_composer(
    S: Tensor | None = None,
    pos_mask: Tensor | None = None,
    config: GoalConfig = GoalConfig("cir", "sig-ms"),
    rel: float = 0.1,
    n: int = 41,
) -> Explorer:
    """Compose a gradient: pick T and P, move their parameters, watch T*P and a batch's dL/dS.

    Starts from `config` (a :class:`vlr_lib.goal.GoalConfig`; its `eps` is kept). Top
    figure: :func:`vlr_lib.viz.goal.weight_surface` with the batch's triplets
    (:func:`vlr_lib.goal.batch_triplets`) on it, the MS forms drawn at m = `rel`;
    bottom: :func:`vlr_lib.viz.goal.gradient_heatmap` of the batch S, whose MS terms
    come from the batch itself and whose title reads out the Table 1 name and the
    gradient's size. Controls a combination does not use
    (``GoalConfig.params``) are disabled. Default batch: demo_embeddings(8, 16, 1.2).
    """
    if not isinstance(config, GoalConfig):
        raise TypeError(f"config must be a GoalConfig, got {type(config).__name__}")
    S = (similarity(*demo_embeddings(n=8, dim=16, noise=1.2, seed=0)) if S is None else S).detach()
    points = goal.batch_triplets(S, pos_mask)
    style = {"style": {"description_width": "initial"}}
    controls = {
        "triplet": W.Dropdown(options=_TRIPLET_OPTIONS, value=config.triplet, description="triplet weight T", **style),
        "pair": W.Dropdown(options=_PAIR_OPTIONS, value=config.pair, description="pair weight P", **style),
        **_sliders(config, ("margin", "tau", "alpha", "beta", "lam")),
        "ms_form": W.Dropdown(options=_MS_FORM_OPTIONS, value=config.ms_form, description="MS reading", **style),
        "rel": _rel_slider(rel, "MS term m (surface)"),
    }

    def enable(_change=None) -> None:
        cfg = GoalConfig(controls["triplet"].value, controls["pair"].value)
        used = {*cfg.params(), *(("rel",) if cfg.pair in ("lin-ms", "sig-ms") else ())}
        for name in ("margin", "tau", "alpha", "beta", "lam", "ms_form", "rel"):
            controls[name].disabled = name not in used

    for name in ("triplet", "pair"):  # registered before the explorer's redraw
        controls[name].observe(enable, names="value")
    enable()

    def draw(rel: float, **fields) -> tuple[go.Figure, go.Figure]:
        cfg = GoalConfig(eps=config.eps, **fields)
        return V.weight_surface(cfg, rel=rel, n=n, points=points), V.gradient_heatmap(S, cfg, pos_mask)

    rows = [["triplet", "pair"], ["margin", "tau", "alpha"], ["beta", "lam", "ms_form", "rel"]]
    # the book: a drop-down over the combinations the notebook's prose and exercise 5 ask for, each with its slider
    views = [BookView(f"(T^{config.triplet}, P^{config.pair})"),
             BookView("(T^con, P^con), margin m slider", {"triplet": "con", "pair": "con"}, "margin"),
             BookView("(T^nca, P^con), scale τ slider", {"triplet": "nca", "pair": "con"}, "tau")]
    return explorer(controls, draw, rows=rows, name="goal", book_views=views)
