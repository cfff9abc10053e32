"""Explorers of notebooks 09 and 11: stored training histories and stored sweep results.

Same convention as `vlr_lib.widgets.evaluation`: each box exposes `.controls`
(name -> widget) and `.figure` (the plotly figure drawn last); callbacks only call one
builder of `vlr_lib.viz.training` (wiring in `_core.Explorer`).
Nothing is trained here: the explorers browse results that already exist.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import ipywidgets as W
import pandas as pd
import plotly.graph_objects as go

from ..report.labels import metric_label
from ..report.sweeps import sweep_losses, sweep_values
from ..viz import training
from ..viz.readout import fmt
from ._core import BookView, Explorer, slider


def training_explorer(
    histories: Mapping[str, object],
    metrics: Sequence[str] = ("loss", "rsum", "sim_gap"),
    shown: Sequence[str] = ("loss", "rsum"),
    chance: float | None = None,
    relative_loss: bool = True,
) -> Explorer:
    """Checkboxes (one per run) and a multi-select of metrics redrawing ``viz.training.curves_figure``.

    `histories`: {run name: history}; `metrics`: the metrics offered; `shown`: the
    ones selected at the start. A run switched off keeps its (invisible) trace, so
    toggling runs updates the traces in place; changing the metrics redraws the panels.
    """
    names = list(histories)
    metrics = list(metrics)
    bad = [m for m in shown if m not in metrics]
    if bad:
        raise ValueError(f"shown has {bad}, not among metrics {metrics}")
    boxes = {f"run:{n}": W.Checkbox(value=True, description=n, indent=False, layout=W.Layout(width="auto"))
             for n in names}
    pick = W.SelectMultiple(options=[(metric_label(m), m) for m in metrics], value=tuple(shown),
                            description="metrics", rows=min(len(metrics), 6))
    controls: dict[str, W.Widget] = {"metrics": pick, **boxes}

    def draw(metrics: Sequence[str], **switches: bool) -> go.Figure:
        runs = [n for n in names if switches[f"run:{n}"]]
        return training.curves_figure(histories, list(metrics), runs, relative_loss=relative_loss, chance=chance)

    # the book: a drop-down over the metrics (the prose's "pick the metrics"); the runs are ticked in the
    # figure's legend, which plotly toggles without Python
    choices = [tuple(shown)] + [(m,) for m in metrics if (m,) != tuple(shown)]
    views = [BookView(" and ".join(metric_label(m) for m in c), {"metrics": c}) for c in choices]
    box = Explorer(controls, draw, [W.HBox([pick, W.VBox(list(boxes.values()))])], "training", main="metrics",
                   book_views=views)
    for c in controls.values():
        c.observe(box.redraw, names="value")
    return box


def _other(values: Mapping[str, list], x: str) -> str | None:
    rest = [p for p in values if p != x]
    return rest[0] if rest else None


def _sweep_views(runs: pd.DataFrame, losses: Sequence[str], loss: str, x: str, metric: str) -> list[BookView]:
    """The book's drop-down of the sweep explorer: every sweep against each of its parameters, its slider the
    other parameter's value (a two-parameter sweep) or the metric; first the explorer's own setting, then
    its metric on the slider. The "at" slider's options depend on the sweep, so each view brings its own."""
    views = []
    for name in losses:
        values = sweep_values(runs, name)
        for p in values:
            other = _other(values, p)
            if other is None:
                views.append(BookView(f"{name} vs {p}, metric slider", {"loss": name, "x": p}, "metric"))
                continue
            grid = tuple((fmt(v), v) for v in values[other])
            views.append(BookView(f"{name}: {metric_label(metric)} vs {p}, {other} slider",
                                  {"loss": name, "x": p, "at": grid[len(grid) // 2][1]}, "at", grid, other))
    first = next(i for i, v in enumerate(views) if (v.values["loss"], v.values["x"]) == (loss, x))
    views.insert(0, views.pop(first))
    if views[0].main == "at":
        at = views[0].values["at"]
        views.insert(1, BookView(f"{loss} vs {x} at {views[0].description} = {fmt(at)}, metric slider",
                                 {"loss": loss, "x": x, "at": at}, "metric"))
    return views


def sweep_explorer(
    runs: pd.DataFrame,
    metric: str = "rsum",
    metrics: Sequence[str] = ("rsum", "i2t_r1", "t2i_r1", "best_rsum", "map5", "pr_auc", "pos_sim", "hardneg_sim"),
    references: Sequence[str] = (),
    chance: float | None = None,
    loss: str | None = None,
) -> Explorer:
    """Browse a grid's runs table: which sweep, which parameter on the x-axis, the slice, the metric.

    Controls: "loss" (the losses with a swept parameter), "x" (its swept parameters),
    "at" (the value of the other parameter of a two-parameter sweep, e.g. m when x
    is gamma; disabled for one-parameter sweeps) and "metric". The figure is
    ``viz.training.sweep_figure``. Changing the loss or x first resets the dependent controls,
    then redraws once.
    """
    losses = sweep_losses(runs)
    if not losses:
        raise ValueError("runs has no loss with a swept parameter (two or more values)")
    metrics = [m for m in metrics if m in runs.columns]
    if metric not in metrics:
        raise ValueError(f"metric must be one of {metrics}, got {metric!r}")
    loss = loss if loss is not None else losses[0]
    if loss not in losses:
        raise ValueError(f"loss must be one of {losses}, got {loss!r}")
    refs = [r for r in references if r in set(runs["loss"])]
    controls = {
        "loss": W.Dropdown(options=losses, value=loss, description="sweep"),
        "x": W.Dropdown(options=[""], description="x-axis"),
        "at": slider(W.SelectionSlider, "at", options=["—"]),
        "metric": W.Dropdown(options=[(metric_label(m), m) for m in metrics], value=metric, description="metric"),
    }
    busy = [False]  # while the dependent controls are reset, their own events must not redraw

    def sync(reset_x: bool) -> None:
        values = sweep_values(runs, controls["loss"].value)
        if reset_x or controls["x"].value not in values:
            controls["x"].options = list(values)
            controls["x"].value = list(values)[-1]  # the last swept parameter (gamma in m x gamma)
        other = _other(values, controls["x"].value)
        at = controls["at"]
        at.description = other or "at"
        if other is None:
            at.options, at.disabled = ["—"], True
        else:
            options = [(fmt(v), v) for v in values[other]]
            at.options, at.disabled = options, False
            at.value = options[len(options) // 2][1]

    def draw(loss: str, x: str, at: float, metric: str) -> go.Figure:
        other = _other(sweep_values(runs, loss), x)
        fixed = {other: at} if other is not None else {}
        return training.sweep_figure(runs, loss, x, fixed, metric, refs, chance)

    sync(reset_x=True)
    box = Explorer(controls, draw, [W.HBox([controls["loss"], controls["x"]]),
                                    W.HBox([controls["at"], controls["metric"]])], "sweep",
                   main="metric" if controls["at"].disabled else "at",
                   book_views=_sweep_views(runs, losses, loss, controls["x"].value, metric))

    def on_change(change=None) -> None:
        if busy[0]:
            return
        owner = None if change is None else change.get("owner")
        if owner is controls["loss"] or owner is controls["x"]:
            busy[0] = True
            try:
                sync(reset_x=owner is controls["loss"])
            finally:
                busy[0] = False
        box.redraw()

    for c in controls.values():
        c.observe(on_change, names="value")
    return box
