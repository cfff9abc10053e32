"""Explorers of GOAL (Xuan & Chen, sec. 3): controls wired to the builders of vlr_lib.viz.goal.

Each function returns an ipywidgets container with two extra attributes, `controls`
(name -> widget) and `figures` (the go.FigureWidget objects), so tests and readers can
drive it without a browser: set ``box.controls["tau"].value = 20`` and the figures follow.
"""
from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
from torch import Tensor

from .. import goal
from ..notebook import demo_embeddings
from ..similarity import similarity
from ..viz import goal as viz
from ._core import refresh

__all__ = ["triplet_explorer", "pair_weight_explorer", "goal_composer", "refresh"]

_STYLE = dict(style={"description_width": "initial"}, continuous_update=False)
_TRIPLET_LABELS = [
    ("T^con (triplet loss, eq. 5)", "con"),
    ("T^nca (NCA, eq. 7)", "nca"),
    ("T^cir (Circle, eq. 8)", "cir"),
]
_PAIR_LABELS = [
    ("P^con (constant, eq. 9)", "con"),
    ("P^lin (Circle, eq. 10)", "lin"),
    ("P^sig (binomial deviance, eq. 11)", "sig"),
    ("P^lin-ms (linear MS, eq. 13)", "lin-ms"),
    ("P^sig-ms (MS loss, eq. 12)", "sig-ms"),
]


def _slider(description: str, value: float, lo: float, hi: float, step: float) -> widgets.FloatSlider:
    return widgets.FloatSlider(value=value, min=lo, max=hi, step=step, description=description, **_STYLE)


def _assemble(controls: dict, figures: tuple, extra: list | None = None) -> widgets.VBox:
    box = widgets.VBox([widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap")),
                        *(extra or []), *figures])
    box.controls, box.figures = controls, figures
    return box


def triplet_explorer(margin: float = 0.2, tau: float = 10.0, n: int = 61) -> widgets.VBox:
    """Fig. 2 with knobs: the margin m of T^con and the scale τ of T^nca and T^cir."""
    controls = {"margin": _slider("margin m", margin, 0.0, 1.0, 0.05), "tau": _slider("scale τ", tau, 1.0, 50.0, 1.0)}
    fig = go.FigureWidget(viz.triplet_diagrams(margin, tau, n))

    def update(_=None) -> None:
        refresh(fig, viz.triplet_diagrams(controls["margin"].value, controls["tau"].value, n))

    for control in controls.values():
        control.observe(update, names="value")
    return _assemble(controls, (fig,))


def pair_weight_explorer(
    alpha: float = 2.0, beta: float = 10.0, lam: float = 0.5, rel: float = 0.1
) -> widgets.VBox:
    """Fig. 3 with knobs: α, β, λ of the sigmoid forms and the MS relative term m."""
    controls = {
        "alpha": _slider("α", alpha, 0.5, 10.0, 0.5),
        "beta": _slider("β", beta, 1.0, 50.0, 1.0),
        "lam": _slider("λ", lam, -1.0, 1.0, 0.05),
        "rel": _slider("MS term m", rel, 0.05, 2.0, 0.05),
    }
    fig = go.FigureWidget(viz.pair_weight_curves(alpha, beta, lam, rel))

    def update(_=None) -> None:
        refresh(fig, viz.pair_weight_curves(**{k: c.value for k, c in controls.items()}))

    for control in controls.values():
        control.observe(update, names="value")
    return _assemble(controls, (fig,))


def _readout(triplet: str, pair: str, grad: np.ndarray) -> str:
    return (f"<b>({triplet}, {pair})</b> is <b>{goal.TABLE1[(triplet, pair)]}</b> in Table 1 &nbsp;·&nbsp; "
            f"∂L/∂S is non-zero on {int(np.count_nonzero(grad))} of {grad.size} entries, "
            f"largest |∂L/∂S| = {float(np.abs(grad).max()):.3g}")


def goal_composer(
    S: Tensor | None = None,
    pos_mask: Tensor | None = None,
    triplet: str = "cir",
    pair: str = "sig-ms",
    margin: float = 0.2,
    tau: float = 10.0,
    alpha: float = 2.0,
    beta: float = 10.0,
    lam: float = 0.5,
    rel: float = 0.1,
    eps: float = 0.1,
    n: int = 41,
) -> widgets.VBox:
    """Compose a gradient: pick T and P, move their parameters, watch T*P and a batch's dL/dS.

    Top figure: :func:`vlr_lib.viz.goal.weight_surface` with the batch's triplets on it
    (MS forms drawn at m = `rel`); bottom: :func:`vlr_lib.viz.goal.gradient_heatmap`
    of the batch S (its MS terms come from the batch itself, with MS loss's `eps`).
    Sliders a combination does not use are disabled. Default batch: demo_embeddings(8, 16, 1.2).
    """
    if S is None:
        S = similarity(*demo_embeddings(n=8, dim=16, noise=1.2, seed=0))
    S = S.detach()
    points = viz.batch_triplets(S, pos_mask)
    controls = {
        "triplet": widgets.Dropdown(options=_TRIPLET_LABELS, value=triplet, description="triplet weight T",
                                    style=_STYLE["style"]),
        "pair": widgets.Dropdown(options=_PAIR_LABELS, value=pair, description="pair weight P", style=_STYLE["style"]),
        "margin": _slider("margin m", margin, 0.0, 1.0, 0.05),
        "tau": _slider("scale τ", tau, 1.0, 50.0, 1.0),
        "alpha": _slider("α", alpha, 0.5, 10.0, 0.5),
        "beta": _slider("β", beta, 1.0, 50.0, 1.0),
        "lam": _slider("λ", lam, -1.0, 1.0, 0.05),
        "rel": _slider("MS term m (surface)", rel, 0.05, 2.0, 0.05),
    }
    info = widgets.HTML()

    def values() -> dict:
        return {k: c.value for k, c in controls.items()}

    def build() -> tuple[go.Figure, go.Figure]:
        v = values()
        params = {k: v[k] for k in ("margin", "tau", "alpha", "beta", "lam")}
        surface = viz.weight_surface(v["triplet"], v["pair"], rel=v["rel"], n=n, points=points, **params)
        grad = viz.gradient_heatmap(S, v["triplet"], v["pair"], eps=eps, pos_mask=pos_mask, **params)
        info.value = _readout(v["triplet"], v["pair"], np.asarray(grad.data[0].z, dtype=float))
        return surface, grad

    def enable() -> None:
        t, p = controls["triplet"].value, controls["pair"].value
        controls["margin"].disabled = t != "con"
        controls["tau"].disabled = t == "con"
        for name in ("alpha", "beta", "lam"):
            controls[name].disabled = p not in ("sig", "sig-ms")
        controls["rel"].disabled = p not in ("lin-ms", "sig-ms")

    surface, grad = build()
    figures = (go.FigureWidget(surface), go.FigureWidget(grad))
    enable()

    def update(_=None) -> None:
        enable()
        for target, fig in zip(figures, build()):
            refresh(target, fig)

    for control in controls.values():
        control.observe(update, names="value")
    return _assemble(controls, figures, extra=[info])
