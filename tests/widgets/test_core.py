"""vlr_lib.widgets._core: the wiring every explorer shares."""
from __future__ import annotations

import plotly.graph_objects as go

from vlr_lib.widgets import _core as W


def test_refresh_updates_in_place_or_replaces():
    fig = go.FigureWidget(go.Figure([go.Scatter(x=[0, 1], y=[0, 1]), go.Bar(y=[1, 2])]))
    uid = fig.data[0].uid
    W.refresh(fig, go.Figure([go.Scatter(x=[0], y=[5]), go.Bar(y=[3])], layout=dict(title="new")))
    assert fig.data[0].y == (5,) and fig.data[1].y == (3,) and fig.layout.title.text == "new"
    assert fig.data[0].uid == uid  # same trace, updated in place
    W.refresh(fig, go.Figure([go.Heatmap(z=[[1, 2]])]))
    assert [t.type for t in fig.data] == ["heatmap"]


def test_explorer_redraws_on_every_control():
    import ipywidgets as ipw

    calls = []

    def draw(a: int, b: str) -> go.Figure:
        calls.append((a, b))
        return go.Figure(go.Bar(y=[a]), layout=dict(title=b))

    box = W.explorer({"a": ipw.IntSlider(value=1), "b": ipw.Text(value="x")}, draw)
    box.controls["a"].value = 3
    assert box.figure.data[0].y == (3,)
    box.controls["b"].value = "y"
    assert box.figure.layout.title.text == "y" and calls[-1] == (3, "y")
    assert box.figure in box.children


# The book's explorers: the main control's values as plotly frames behind a plotly slider.

def test_control_values_span_the_range_and_keep_the_current_value():
    import ipywidgets as ipw

    lin = W.control_values(ipw.FloatSlider(value=0.2, min=0.0, max=1.0, step=0.05), steps=5)
    assert [v for _, v in lin] == [0.0, 0.2, 0.25, 0.5, 0.75, 1.0]  # on the step grid, 0.2 added
    log = W.control_values(ipw.FloatLogSlider(value=60.0, base=10, min=0, max=4), steps=5)
    assert [v for _, v in log] == [1.0, 10.0, 60.0, 100.0, 1000.0, 10000.0] and log[2][0] == "60"
    ints = W.control_values(ipw.IntSlider(value=3, min=0, max=7), steps=3)
    assert [v for _, v in ints] == [0, 3, 4, 7] and all(isinstance(v, int) for _, v in ints)
    choice = W.control_values(ipw.Dropdown(options=[("A", "a"), ("B", "b"), ("C", "c")], value="b"))
    assert choice == [("A", "a"), ("B", "b"), ("C", "c")]
    assert W.control_values(ipw.Checkbox(value=True)) == []


def test_main_control_is_the_first_usable_slider_then_a_choice():
    import ipywidgets as ipw

    controls = {"on": ipw.Checkbox(), "pick": ipw.Dropdown(options=["a", "b"]),
                "fixed": ipw.SelectionSlider(options=["only"]), "m": ipw.FloatSlider()}
    assert W.main_control(controls) == "m"
    controls["m"].disabled = True
    assert W.main_control(controls) == "pick"
    assert W.main_control({"on": ipw.Checkbox()}) is None


def test_frames_figure_holds_every_figure_and_starts_at_the_active_one():
    figs = [go.Figure(go.Scatter(x=[0, 1], y=[v, 2 * v]), layout=dict(title=f"m = {v}")) for v in (1, 2, 3)]
    fig = W.frames_figure(figs, ["1", "2", "3"], active=1, description="m")
    assert fig.data[0].y == (2, 4) and [f.name for f in fig.frames] == ["0", "1", "2"]
    assert [f.data[0].y for f in fig.frames] == [(1, 2), (2, 4), (3, 6)]
    assert fig.frames[2].layout.title.text == "m = 3"  # a frame carries its layout too
    (slider,) = fig.layout.sliders
    assert slider.active == 1 and [s.label for s in slider.steps] == ["1", "2", "3"]
    assert [list(s.args[0]) for s in slider.steps] == [["0"], ["1"], ["2"]] and slider.steps[0].method == "animate"
    import pytest

    with pytest.raises(ValueError, match="active"):
        W.frames_figure(figs, ["1", "2", "3"], active=3, description="m")


def test_book_figures_evaluate_draw_over_the_main_control_only():
    import ipywidgets as ipw

    calls = []

    def draw(m: float, label: str) -> tuple[go.Figure, go.Figure]:
        calls.append((m, label))
        return go.Figure(go.Bar(y=[m])), go.Figure(go.Bar(y=[-m]))

    controls = {"label": ipw.Dropdown(options=["x", "y"], value="y"),
                "m": ipw.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.5)}
    note, figs = W.book_figures(controls, draw, steps=3)
    assert "m" in note and len(figs) == 2  # one frames figure per figure the explorer draws
    assert sorted(calls) == [(0.0, "y"), (0.5, "y"), (1.0, "y")]  # the other control as it is
    assert [f.data[0].y for f in figs[1].frames] == [(-0.0,), (-0.5,), (-1.0,)]
    assert figs[0].data[0].y == (0.5,)
