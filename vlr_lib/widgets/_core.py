"""The wiring every explorer shares: controls -> one vlr_lib.viz builder -> a live FigureWidget.

Each explorer returns an ipywidgets box whose `.controls` (name -> widget) and
`.figure` (the plotly FigureWidget; `.figures` when the builder draws several) are
exposed, so tests and readers can drive it without a browser: set
``box.controls["margin"].value = 0.3`` and the figure follows.
"""
from __future__ import annotations

from collections.abc import Callable

import ipywidgets as W
import plotly.graph_objects as go


def refresh(fig: go.FigureWidget, new: go.Figure) -> None:
    """Copy a freshly built figure into a live widget, in one batched message to the browser.

    Traces are updated in place (keeping their uids, so the browser updates rather than
    re-creates them) when the builder returned the same kinds of traces; otherwise they are
    replaced. The template is skipped: it never changes and re-validating it is the slow part.
    """
    same = len(fig.data) == len(new.data) and all(a.type == b.type for a, b in zip(fig.data, new.data))
    if not same:  # replacing traces is not allowed inside batch_update
        fig.data = []
        fig.add_traces(new.data)
    with fig.batch_update():
        if same:
            for old, trace in zip(fig.data, new.data):
                props = trace.to_plotly_json()
                props.pop("type", None)
                props.pop("uid", None)
                old.update(props, overwrite=True)
        layout = new.layout.to_plotly_json()
        layout.pop("template", None)
        fig.layout.update(layout, overwrite=True)


def explorer(
    controls: dict[str, W.Widget],
    draw: Callable[..., go.Figure | tuple[go.Figure, ...]],
    rows: list[list[str]] | None = None,
) -> W.VBox:
    """Wire `controls` to `draw(**values)` -- one figure, or a tuple of figures shown one under the
    other: any change redraws them all. Returns VBox(control rows, figures)."""

    def build() -> tuple[go.Figure, ...]:
        out = draw(**{k: c.value for k, c in controls.items()})
        return out if isinstance(out, tuple) else (out,)

    figs = tuple(go.FigureWidget(f) for f in build())

    def on_change(_change=None) -> None:
        for fig, new in zip(figs, build()):
            refresh(fig, new)

    for c in controls.values():
        c.observe(on_change, names="value")
    rows = rows or [list(controls)]
    box = W.VBox([W.HBox([controls[k] for k in row]) for row in rows] + list(figs))
    box.controls, box.figure, box.figures, box.redraw = controls, figs[0], figs, on_change
    return box


def slider(cls, description: str, **kw) -> W.Widget:
    """A control that updates on release (each redraw recomputes a figure)."""
    return cls(description=description, continuous_update=False, style={"description_width": "initial"}, **kw)
