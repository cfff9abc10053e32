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

from collections.abc import Callable, Sequence
from decimal import Decimal

import ipywidgets as W
import plotly.graph_objects as go
import plotly.io as pio
import traitlets

from ..viz._style import LOG_READOUT

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


class Explorer(W.VBox):
    """Controls, the figures `build()` returns under them, and the re-run hint; `redraw()` rebuilds the figures.

    The box carries the CSS classes ``vlr-explorer`` and ``vlr-explorer-<name>`` (the browser tests
    find explorers by them).
    """

    def __init__(self, controls: dict[str, W.Widget], draw: Callable[..., Figures], header: Sequence[W.Widget],
                 name: str, main: str) -> None:
        if main not in controls:
            raise ValueError(f"main must name one of the controls {list(controls)}, got {main!r}")
        self.controls, self.draw, self.main, self.name = controls, draw, main, name
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


def explorer(
    controls: dict[str, W.Widget],
    draw: Callable[..., Figures],
    rows: list[list[str]] | None = None,
    name: str | None = None,
    main: str | None = None,
) -> Explorer:
    """Wire `controls` to `draw(**values)` -- one figure, or a tuple of figures shown one under the
    other: any change redraws them all. `rows` lays the controls out (default: one row); `name` (default:
    the function that defines `draw`) becomes the CSS class ``vlr-explorer-<name>``; `main` names the
    control a reader moves first (default: the first slider, else the first control)."""
    if name is None:  # the function that defines `draw` (or `draw` itself, when it is a module's function)
        scopes = draw.__qualname__.split(".<locals>.")
        name = scopes[-2 if len(scopes) > 1 else -1].split(".")[-1].replace("_", "-")
    if main is None:
        main = next((k for k, c in controls.items() if isinstance(c, SLIDERS)
                     and not c.disabled), next(iter(controls)))
    box = Explorer(controls, draw, [W.HBox([controls[k] for k in row]) for row in rows or [list(controls)]], name,
                   main)
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
