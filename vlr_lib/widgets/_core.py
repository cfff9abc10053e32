"""The wiring every explorer shares: controls -> one vlr_lib.viz builder -> a live FigureWidget.

Each explorer returns an ipywidgets box whose `.controls` (name -> widget) and
`.figure` (the plotly FigureWidget; `.figures` when the builder draws several) are
exposed, so tests and readers can drive it without a browser: set
``box.controls["margin"].value = 0.3`` and the figure follows.
"""
from __future__ import annotations

from collections.abc import Callable

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go

from .. import book


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
    if book.active():  # the static book shows the explorer's figures over its main control instead
        box._repr_mimebundle_ = lambda **_: book_bundle(controls, draw)
    return box


def slider(cls, description: str, **kw) -> W.Widget:
    """A control that updates on release (each redraw recomputes a figure)."""
    return cls(description=description, continuous_update=False, style={"description_width": "initial"}, **kw)


# --- The book's explorers (`make book`, VLR_BOOK=1): no kernel, so no widgets. The explorer's own draw
# function is evaluated once per value of its main control, and the figures are packed as plotly frames
# behind a plotly slider, which the browser moves without Python. The other controls stay as they are.

BOOK_STEPS = 9  # values of the main control per explorer: enough to see the trend, pages stay small
_SLIDERS = (W.FloatLogSlider, W.FloatSlider, W.IntSlider, W.SelectionSlider)
_CHOICES = (W.Dropdown, W.ToggleButtons, W.RadioButtons)


def control_values(control: W.Widget, steps: int = BOOK_STEPS) -> list[tuple[str, object]]:
    """(label, value) pairs across `control`'s range, its current value among them, at most `steps` (+1)."""
    if isinstance(control, W.FloatLogSlider):
        grid = [float(v) for v in control.base ** np.linspace(control.min, control.max, steps)]
    elif isinstance(control, (W.FloatSlider, W.IntSlider)):
        raw = np.linspace(control.min, control.max, steps)
        grid = [control.min + round((v - control.min) / control.step) * control.step for v in raw]
        grid = [int(v) if isinstance(control, W.IntSlider) else round(float(v), 12) for v in grid]
    elif isinstance(control, (W.SelectionSlider, *_CHOICES)):
        pairs = list(zip(control._options_labels, control._options_values))
        picks = sorted({round(i) for i in np.linspace(0, len(pairs) - 1, min(steps, len(pairs)))})
        chosen = [pairs[i] for i in picks]
        if control.value not in [v for _, v in chosen]:
            chosen = sorted(chosen + [pairs[control.index]], key=pairs.index)
        return chosen
    else:
        return []
    current = round(float(control.value), 12) if isinstance(control.value, float) else control.value
    return [(_label(v), v) for v in sorted(set(grid) | {current})]


def _label(value: float) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def main_control(controls: dict[str, W.Widget]) -> str | None:
    """The control the book's slider moves: the first enabled slider with two values or more, else the first
    such choice (dropdown, toggle buttons); None when there is neither (the book shows the figure as it is)."""
    for kinds in (_SLIDERS, _CHOICES):
        for name, control in controls.items():
            if isinstance(control, kinds) and not control.disabled and len(control_values(control)) > 1:
                return name
    return None


def frames_figure(figures: list[go.Figure], labels: list[str], active: int, description: str) -> go.Figure:
    """`figures` (one per value of a control) as one figure whose plotly slider shows each in turn.

    The figure at `active` is drawn first; every figure is a frame holding its traces and layout, and the
    slider's steps animate to a frame at once (no transition), so moving it redraws as the widget would.
    """
    if len(figures) != len(labels) or not 0 <= active < len(figures):
        raise ValueError(f"figures and labels must match and 0 <= active < {len(figures)}, got active={active}")
    fig = go.Figure(figures[active])
    fig.frames = [go.Frame(data=f.data, layout=_frame_layout(f), name=str(i)) for i, f in enumerate(figures)]
    now = dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))
    steps = [dict(method="animate", label=label, args=[[str(i)], now]) for i, label in enumerate(labels)]
    slider = dict(active=active, steps=steps, currentvalue=dict(prefix=f"{description} = "), x=0, len=1,
                  y=0, yanchor="top", pad=dict(t=55, b=0))
    margin_b = (fig.layout.margin.b if fig.layout.margin.b is not None else 60) + 90
    fig.update_layout(sliders=[*fig.layout.sliders, slider], margin_b=margin_b)
    if fig.layout.height:
        fig.update_layout(height=fig.layout.height + 90)
    return fig


def _frame_layout(fig: go.Figure) -> dict:
    """What a frame changes in the layout: titles, annotations, shapes, axes (not the template or sliders)."""
    layout = fig.layout.to_plotly_json()
    for key in ("template", "sliders", "height", "width", "margin"):
        layout.pop(key, None)
    return layout


def book_figures(controls: dict[str, W.Widget], draw: Callable[..., go.Figure | tuple[go.Figure, ...]],
                 steps: int = BOOK_STEPS) -> tuple[str, list[go.Figure]]:
    """What the book shows for an explorer: a line saying what its slider moves, and its figures, each with
    the main control's values as frames (`frames_figure`); the other controls keep their current values."""
    values = {k: c.value for k, c in controls.items()}

    def build(**over) -> tuple[go.Figure, ...]:
        out = draw(**{**values, **over})
        return out if isinstance(out, tuple) else (out,)

    name = main_control(controls)
    if name is None:
        return "In the book this explorer shows its first view; run the notebook to change it.", list(build())
    control = controls[name]
    grid = control_values(control, steps)
    labels = [label for label, _ in grid]
    active = int(np.argmin([abs(v - control.value) for _, v in grid])) if isinstance(control.value, (int, float)) \
        else [v for _, v in grid].index(control.value)
    per_value = [build(**{name: v}) for _, v in grid]
    description = control.description or name
    note = (f"In the book the slider under each figure moves <b>{description}</b> over {len(grid)} precomputed "
            "values; the other controls stay as shown in the notebook (run it to change them).")
    return note, [frames_figure([figs[j] for figs in per_value], labels, active, description)
                  for j in range(len(per_value[0]))]


def book_bundle(controls: dict[str, W.Widget], draw: Callable[..., go.Figure | tuple[go.Figure, ...]]) -> dict:
    """The explorer as the book shows it (a display bundle): the note and its frames figures, as HTML that
    draws them with the page's plotly.js (vlr_lib.book)."""
    note, figures = book_figures(controls, draw)
    html = "".join(book.BookRenderer().to_mimebundle(f.to_dict())["text/html"] for f in figures)
    return {"text/html": f'<div class="vlr-book-explorer"><p class="vlr-book-note">{note}</p>{html}</div>',
            "text/plain": f"<explorer: {len(figures)} figure(s) over {main_control(controls)}>"}
