"""The wiring every explorer shares: controls -> one vlr_lib.viz builder -> the figure(s) under them.

An explorer is an :class:`Explorer` box: rows of controls, its figures, and a one-line hint. Each
figure is shown in an ``ipywidgets.Output`` as the notebook's own plotly output (what the cell would
show for a ``go.Figure``), so:

- JupyterLab draws it with the plotly.js that ships with its plotly extension: no download, no CDN;
- it fills the width of the notebook and follows it when the window or the file browser changes;
- it is part of the widget state that JupyterLab saves with the notebook (`make lab` turns that
  on), so a reopened notebook still shows the last figure -- a picture until the cell runs again,
  which the hint under every explorer says.

One call declares an explorer: ``explorer(controls, draw, rows, name, main)`` -- the controls
(name -> widget), the pure `vlr_lib.viz` builder `draw(**values)` they feed, and `main`, the
control a reader moves first (default: the first slider). The box keeps all three:
`.controls`, `.draw` (the builder itself, so the same figures can be built for any values without
widgets, e.g. over a grid of `.main`'s range) and `.main`; `.values()` are the controls' current
values, `.figure` the `go.Figure` drawn last (`.figures` when the builder draws several). Tests
and readers drive an explorer without a browser: ``box.controls["margin"].value = 0.3`` and the
figure follows.
"""
from __future__ import annotations

import html as _html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import traitlets

from .. import env
from ..viz.html import BookRenderer
from ..viz.readout import LOG_READOUT

PLOTLY_MIME = "application/vnd.plotly.v1+json"
HINT = ("If the controls do nothing, run this cell again: a reopened notebook shows the explorer as it was "
        "saved, not live.")

Figures = go.Figure | tuple[go.Figure, ...]
SLIDERS = (W.FloatSlider, W.FloatLogSlider, W.IntSlider, W.SelectionSlider)


def display_data(fig: go.Figure) -> dict:
    """`fig` as a notebook display output: what the active plotly renderer shows, and always the plotly JSON
    (which JupyterLab, Notebook 7 and VS Code draw with their own local plotly.js)."""
    data = fig._repr_mimebundle_()  # the IPython display protocol: honours the renderer setup() chose
    if PLOTLY_MIME not in data:
        data.update(pio.renderers["plotly_mimetype"].to_mimebundle(fig.to_dict()))
    title = fig.layout.title.text or "figure"
    data["text/plain"] = f"<plotly figure: {title}>"
    return {"output_type": "display_data", "data": data, "metadata": {}}


def show(out: W.Output, fig: go.Figure) -> None:
    """Replace what `out` shows by `fig`, in one message (no flicker, and no kernel message routing needed)."""
    out.outputs = (display_data(fig),)


@dataclass(frozen=True)
class BookView:
    """One choice of the book's drop-down over an explorer's other controls: its `label`, the control values it
    sets (`values`; a value for the slider's own control is where the slider starts), the control its slider
    moves (`main`, default the explorer's), and the slider's (label, value) steps (`grid`, default across that
    control's range) and name (`description`, default the control's): a view needs its own when its settings
    change the control's options."""

    label: str
    values: dict[str, object] = field(default_factory=dict)
    main: str | None = None
    grid: tuple[tuple[str, object], ...] = ()
    description: str | None = None


class Explorer(W.VBox):
    """Controls, the figures `build()` returns under them, and the re-run hint; `redraw()` rebuilds the figures.

    The box carries the CSS classes ``vlr-explorer`` and ``vlr-explorer-<name>`` (the browser tests
    find explorers by them).
    """

    def __init__(self, controls: dict[str, W.Widget], draw: Callable[..., Figures], header: Sequence[W.Widget],
                 name: str, main: str, book_views: Sequence[BookView] = ()) -> None:
        if main not in controls:
            raise ValueError(f"main must name one of the controls {list(controls)}, got {main!r}")
        for view in book_views:
            unknown = sorted({*view.values, *([view.main] if view.main else [])} - set(controls))
            if unknown:
                raise ValueError(f"book_views: view {view.label!r} names no control {unknown} (controls: {list(controls)})")
        self.controls, self.draw, self.main, self.name = controls, draw, main, name
        self.book_views = tuple(book_views)
        self.figures = self._figures()
        self._outputs = tuple(W.Output(layout=W.Layout(width="100%")) for _ in self.figures)
        for out, fig in zip(self._outputs, self.figures):
            show(out, fig)
        hint = W.HTML(f'<span style="color: #616161; font-size: 12px">{HINT}</span>')
        super().__init__([*header, *self._outputs, hint], layout=W.Layout(width="100%"))
        self.add_class("vlr-explorer")
        self.add_class(f"vlr-explorer-{name}")

    @property
    def figure(self) -> go.Figure:
        return self.figures[0]

    def values(self) -> dict[str, object]:
        """The controls' current values: ``draw(**values())`` is what the explorer shows."""
        return {k: c.value for k, c in self.controls.items()}

    def _figures(self) -> tuple[go.Figure, ...]:
        out = self.draw(**self.values())
        return out if isinstance(out, tuple) else (out,)

    def redraw(self, _change=None) -> None:
        self.figures = self._figures()
        for out, fig in zip(self._outputs, self.figures):
            show(out, fig)

    def _repr_mimebundle_(self, **kwargs) -> dict:
        """In JupyterLab the live widget; in the static book (VLR_BOOK=1) its plotly-native version."""
        if env.book_mode():
            return book_bundle(self)
        return super()._repr_mimebundle_(**kwargs)


def explorer(
    controls: dict[str, W.Widget],
    draw: Callable[..., Figures],
    rows: list[list[str]] | None = None,
    name: str | None = None,
    main: str | None = None,
    book_views: Sequence[BookView] = (),
) -> Explorer:
    """Wire `controls` to `draw(**values)` -- one figure, or a tuple of figures shown one under the
    other: any change redraws them all. `rows` lays the controls out (default: one row); `name` (default:
    the function that defines `draw`) becomes the CSS class ``vlr-explorer-<name>``; `main` names the
    control a reader moves first (default: the first slider, else the first control). `book_views` gives the
    static book a drop-down over precomputed settings of the other controls (:class:`BookView`; the first is
    the one shown first), each with its own slider, for an explorer whose prose asks for a second control."""
    if name is None:  # the function that defines `draw` (or `draw` itself, when it is a module's function)
        scopes = draw.__qualname__.split(".<locals>.")
        name = scopes[-2 if len(scopes) > 1 else -1].split(".")[-1].replace("_", "-")
    if main is None:
        main = next((k for k, c in controls.items() if isinstance(c, SLIDERS)
                     and not c.disabled), next(iter(controls)))
    box = Explorer(controls, draw, [W.HBox([controls[k] for k in row]) for row in rows or [list(controls)]], name,
                   main, book_views)
    for c in controls.values():
        c.observe(box.redraw, names="value")
    return box


class LogSlider(W.FloatLogSlider):
    """A log-scale slider whose readout trims trailing zeros ("60", not "60.0"): d3-format's "~", which the
    browser understands but ipywidgets' Python-side check of the format does not know."""

    readout_format = traitlets.Unicode(LOG_READOUT).tag(sync=True)


def readout_format(cls, step: float) -> str:
    """How a slider shows its value, which is also how the figures print it (``viz._style.shown``): a log
    slider three significant digits, a linear one as many decimals as its step has."""
    if issubclass(cls, W.FloatLogSlider):
        return LOG_READOUT
    decimals = max(0, -Decimal(str(step)).normalize().as_tuple().exponent)
    return f".{decimals}f"


def slider(cls, description: str, **kw) -> W.Widget:
    """A control that updates on release (each redraw recomputes a figure), its readout as the figures print it."""
    if cls is W.FloatLogSlider:
        cls = LogSlider
    if cls in (W.FloatSlider, LogSlider):
        kw.setdefault("readout_format", readout_format(cls, kw.get("step", 0.1)))
    return cls(description=description, continuous_update=False, style={"description_width": "initial"}, **kw)


# --- The book's explorers (`make book`, VLR_BOOK=1): no kernel, so no widgets. The explorer's own `draw`
# is evaluated once per value of its main control, and the figures are packed as plotly frames behind a
# plotly slider, which the browser moves without Python. The other controls keep their current values.

BOOK_STEPS = 9  # values of the main control per explorer: enough to see the trend, pages stay small
CHOICES = (W.Dropdown, W.ToggleButtons, W.RadioButtons, W.SelectionSlider)


def control_values(control: W.Widget, steps: int = BOOK_STEPS) -> list[tuple[str, object]]:
    """(label, value) pairs across `control`'s range, its current value among them, at most `steps` (+1);
    none for a control without a range or options (a checkbox, a text field)."""
    if isinstance(control, W.FloatLogSlider):
        grid = [float(v) for v in control.base ** np.linspace(control.min, control.max, steps)]
    elif isinstance(control, (W.FloatSlider, W.IntSlider)):
        raw = np.linspace(control.min, control.max, steps)
        grid = [control.min + round((v - control.min) / control.step) * control.step for v in raw]
        grid = [int(v) if isinstance(control, W.IntSlider) else round(float(v), 12) for v in grid]
    elif isinstance(control, CHOICES):
        pairs = list(zip(control._options_labels, control._options_values))
        chosen = [pairs[i] for i in sorted({round(i) for i in np.linspace(0, len(pairs) - 1, min(steps, len(pairs)))})]
        if control.index is not None and pairs[control.index] not in chosen:
            chosen = sorted(chosen + [pairs[control.index]], key=pairs.index)
        return chosen
    else:
        return []
    current = round(float(control.value), 12) if isinstance(control.value, float) else control.value
    return [(f"{v:.3g}" if isinstance(v, float) else str(v), v) for v in sorted(set(grid) | {current})]


def frames_figure(figures: list[go.Figure], labels: list[str], active: int, description: str) -> go.Figure:
    """`figures` (one per value of a control) as one figure whose plotly slider shows each in turn.

    The figure at `active` is drawn first; every figure is a frame holding its layout and the traces that
    differ between figures (`_moving_traces`), and the slider's steps animate to a frame at once (no
    transition), so moving it redraws as the widget would.
    The slider sits under the plot, above the legend (which stays at the bottom of the figure).
    """
    if len(figures) != len(labels) or not 0 <= active < len(figures):
        raise ValueError(f"figures and labels must match and 0 <= active < {len(figures)}, got active={active}")
    # animate updates traces by index: a view with fewer traces (a metric with fewer series) gets hidden
    # placeholders, so every frame has as many as the most crowded one
    n = max(len(f.data) for f in figures)
    data = [[*f.data, *[go.Scatter(x=[], y=[], visible=False, showlegend=False)] * (n - len(f.data))]
            for f in figures]
    fig = go.Figure(figures[active])
    fig.add_traces(data[active][len(fig.data):])
    moving = _moving_traces(data)
    fig.frames = [go.Frame(data=[d[k] for k in moving], traces=moving, layout=_frame_layout(f), name=str(i))
                  for i, (d, f) in enumerate(zip(data, figures))]
    now = dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))
    steps = [dict(method="animate", label=label, args=[[str(i)], now]) for i, label in enumerate(labels)]
    slider = dict(active=active, steps=steps, currentvalue=dict(prefix=f"{description} = "), x=0, len=1,
                  y=0, yanchor="top", pad=dict(t=SLIDER_TOP, b=0))
    margin_b = fig.layout.margin.b if fig.layout.margin.b is not None else 50
    extra = SLIDER_PX + legend_px(fig)  # the legend stays under the slider, clear of its tick labels
    fig.update_layout(sliders=[*fig.layout.sliders, slider], margin_b=margin_b + extra)
    if fig.layout.height:
        fig.update_layout(height=fig.layout.height + extra)
    return fig


COLUMN_PX, LEGEND_ROW_PX = 620, 30  # the legend's width in the book's column; px per row of legend entries


def legend_px(fig: go.Figure) -> int:
    """The px a legend at the bottom of the figure needs: rows of entries (about 7 px a character and 40 px
    of symbol and gap each) wrapped at the book's column width; 0 without a legend."""
    if fig.layout.showlegend is False or not fig.layout.legend or fig.layout.legend.yref != "container":
        return 0
    names = [t.name for t in fig.data if t.name and t.showlegend is not False]
    width = sum(40 + 7 * len(name) for name in names)
    return LEGEND_ROW_PX * int(np.ceil(width / COLUMN_PX)) if names else 0


SLIDER_TOP, SLIDER_PX = 45, 95  # px from the plot to the slider (tick labels, axis title); px the slider needs


def _moving_traces(data: list[list]) -> list[int]:
    """The indices of the traces that differ between frames: a frame carries only those (plotly's `traces`),
    so a map that stays put under the slider is stored once, not once per frame. All of them when none
    moves (the frames then change the layout alone)."""
    def canonical(trace) -> str:  # plotly may order a trace's keys differently once it is copied into a figure
        return json.dumps(json.loads(trace.to_json()), sort_keys=True)

    moving = [k for k in range(len(data[0])) if len({canonical(frame[k]) for frame in data}) > 1]
    return moving or list(range(len(data[0])))


def _frame_layout(fig: go.Figure) -> dict:
    """What a frame changes in the layout: titles, annotations, shapes, axes (not the template, size or sliders)."""
    layout = fig.layout.to_plotly_json()
    for key in ("template", "sliders", "height", "width", "margin", "legend"):
        layout.pop(key, None)
    return layout


def book_figures(box: Explorer, steps: int = BOOK_STEPS, view: BookView | None = None) -> tuple[str, list[go.Figure]]:
    """What the book shows for an explorer: a line saying what its slider moves, and its figures, each with
    the main control's values as frames (`frames_figure`); the other controls keep their current values, or
    the values `view` sets (its `main`, when it names one, is the control the slider moves; a view of a
    control without a range, such as a multi-select, is drawn once)."""
    main = (view.main if view else None) or box.main
    control, values = box.controls[main], {**box.values(), **(view.values if view else {})}
    if view and view.grid:
        grid = list(view.grid)
    else:
        grid = control_values(control, steps) if not control.disabled or (view and view.main) else []
    if len(grid) < 2 and view and view.values:  # a view without a slider: drawn once, as it sets the controls
        out = box.draw(**values)
        return ("In the book this view is drawn once, with the controls as the drop-down above sets them; run the "
                "notebook to change them.", list(out if isinstance(out, tuple) else (out,)))
    if len(grid) < 2:
        return "In the book this explorer shows its first view; run the notebook to change it.", list(box.figures)
    per_value = []
    for _, v in grid:
        out = box.draw(**{**values, main: v})
        per_value.append(out if isinstance(out, tuple) else (out,))
    active = _active([v for _, v in grid], values[main])
    description = (view.description if view else None) or control.description or main
    note = (f"In the book the slider under each figure moves <b>{description}</b> over {len(grid)} precomputed "
            + ("values; the other controls are set as the drop-down above says (run the notebook for any other "
               "setting)." if view else "values; the other controls stay as in the notebook (run it to change them)."))
    labels = [label for label, _ in grid]
    return note, [frames_figure([figs[j] for figs in per_value], labels, active, description)
                  for j in range(len(per_value[0]))]


def _active(grid: list, value: object) -> int:
    """The step of `grid` the slider starts at: `value`'s, else the nearest to a number, else the first."""
    if value in grid:
        return grid.index(value)
    if isinstance(value, (int, float)) and all(isinstance(v, (int, float)) for v in grid):
        return int(np.argmin([abs(v - value) for v in grid]))
    return 0


def _view_html(box: Explorer, view: BookView | None) -> tuple[str, int]:
    note, figures = book_figures(box, view=view)
    html = "".join(BookRenderer().to_mimebundle(f.to_dict())["text/html"] for f in figures)
    return f'<p class="vlr-book-note">{note}</p>{html}', len(figures)


# Show the chosen view, hide the others, and let plotly size the figures that were drawn hidden.
_SHOW_VIEW = ("var box=this.closest('.vlr-book-explorer');box.querySelectorAll('.vlr-book-view').forEach("
              "function(v,i){v.style.display=(i==this.selectedIndex)?'':'none';if(i==this.selectedIndex&&window.Plotly)"
              "{v.querySelectorAll('.js-plotly-plot').forEach(function(g){Plotly.Plots.resize(g);});}},this);")


def book_bundle(box: Explorer) -> dict:
    """The explorer as the book shows it (a display bundle): the note and its figures, as HTML that draws them
    with the page's plotly.js (vlr_lib.book); with `book_views`, a drop-down over them, each its own slider."""
    if not box.book_views:
        html, n = _view_html(box, None)
        return {"text/html": f'<div class="vlr-book-explorer">{html}</div>',
                "text/plain": f"<explorer {box.name}: {n} figure(s) over {box.main}>"}
    options = "".join(f"<option>{_html.escape(v.label)}</option>" for v in box.book_views)
    hidden = ' style="display:none"'
    views = "".join(f'<div class="vlr-book-view"{"" if i == 0 else hidden}>{_view_html(box, v)[0]}</div>'
                    for i, v in enumerate(box.book_views))
    select = (f'<p class="vlr-book-second"><label>Show: <select class="vlr-book-select" onchange="{_SHOW_VIEW}">'
              f"{options}</select></label></p>")
    return {"text/html": f'<div class="vlr-book-explorer">{select}{views}</div>',
            "text/plain": f"<explorer {box.name}: {len(box.book_views)} views, each over its slider>"}
