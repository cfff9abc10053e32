"""vlr_lib.widgets._core: the wiring every explorer shares."""
from __future__ import annotations

import ipywidgets as ipw
import plotly.graph_objects as go
import pytest

from tests.viz.helpers import title
from vlr_lib.viz.readout import readout
from vlr_lib.widgets import _core as W


def explorer():
    calls = []

    def draw(a: int, b: str) -> go.Figure:
        calls.append((a, b))
        return go.Figure(go.Bar(y=[a]), layout=dict(title=b))

    return W.explorer({"a": ipw.IntSlider(value=1), "b": ipw.Text(value="x")}, draw, name="test"), calls


def test_explorer_redraws_on_every_control():
    box, calls = explorer()
    box.controls["a"].value = 3
    assert box.figure.data[0].y == (3,)
    box.controls["b"].value = "y"
    assert title(box.figure) == "y" and calls[-1] == (3, "y")


def test_explorer_shows_the_figure_as_plotly_output_with_the_hint():
    box, _ = explorer()
    out = [c for c in box.children if isinstance(c, ipw.Output)]
    assert len(out) == 1
    (shown_output,) = out[0].outputs
    data = shown_output["data"]
    assert data[W.PLOTLY_MIME]["data"][0]["type"] == "bar"
    box.controls["a"].value = 7
    (shown_output,) = out[0].outputs  # replaced, not appended
    assert list(box.figure.data[0].y) == [7] and shown_output["data"]["text/plain"].startswith("<plotly figure")
    assert isinstance(box.children[-1], ipw.HTML) and "run this cell again" in box.children[-1].value
    assert {"vlr-explorer", "vlr-explorer-test"} <= set(box._dom_classes)


def test_explorer_name_defaults_to_the_defining_function():
    def my_explorer():
        def draw(a: int) -> go.Figure:
            return go.Figure(go.Bar(y=[a]))
        return W.explorer({"a": ipw.IntSlider(value=1)}, draw)

    assert "vlr-explorer-my-explorer" in my_explorer()._dom_classes


def test_several_figures_redraw_together():
    box = W.explorer({"a": ipw.IntSlider(value=1)},
                     lambda a: (go.Figure(go.Bar(y=[a])), go.Figure(go.Bar(y=[2 * a]))), name="two")
    box.controls["a"].value = 4
    assert [f.data[0].y for f in box.figures] == [(4,), (8,)] and box.figure is box.figures[0]
    assert sum(isinstance(c, ipw.Output) for c in box.children) == 2


@pytest.mark.parametrize(("step", "spec"), [(1.0, ".0f"), (0.05, ".2f"), (0.1, ".1f"), (0.25, ".2f"), (0.01, ".2f")])
def test_a_linear_slider_shows_as_many_decimals_as_its_step(step, spec):
    s = W.slider(ipw.FloatSlider, "x", value=0.0, min=0.0, max=10.0, step=step)
    assert s.readout_format == spec and not s.continuous_update


def test_a_log_slider_trims_zeros_like_the_titles():
    s = W.slider(ipw.FloatLogSlider, "γ", value=60.0, base=10, min=0, max=4, step=0.05)
    assert isinstance(s, ipw.FloatLogSlider) and s.readout_format == ".3~g"
    assert readout(s.value, s.readout_format) == "60"


def test_an_explorer_keeps_its_builder_and_main_control():
    """What a static (kernel-free) version needs: the pure builder, the control to sweep, the current values."""
    box, _ = explorer()
    assert box.main == "a" and box.values() == {"a": 1, "b": "x"}  # the first slider, by default
    assert box.draw(**{**box.values(), "a": 5}).data[0].y == (5,)
    assert box.controls["a"].value == 1  # building a figure for other values leaves the explorer as it was
    named = W.explorer({"a": ipw.IntSlider(value=1), "b": ipw.Text(value="x")},
                       lambda a, b: go.Figure(go.Bar(y=[a])), name="t", main="b")
    assert named.main == "b"
    with pytest.raises(ValueError, match="main"):
        W.explorer({"a": ipw.IntSlider(value=1)}, lambda a: go.Figure(), name="t", main="z")


# The book's explorers (VLR_BOOK=1): the main control's values as plotly frames behind a plotly slider.

def test_control_values_span_the_range_and_keep_the_current_value():
    lin = W.control_values(ipw.FloatSlider(value=0.2, min=0.0, max=1.0, step=0.05), steps=5)
    assert [v for _, v in lin] == [0.0, 0.2, 0.25, 0.5, 0.75, 1.0]  # on the step grid, 0.2 added
    log = W.control_values(ipw.FloatLogSlider(value=60.0, base=10, min=0, max=4), steps=5)
    assert [v for _, v in log] == [1.0, 10.0, 60.0, 100.0, 1000.0, 10000.0] and log[2][0] == "60"
    ints = W.control_values(ipw.IntSlider(value=3, min=0, max=7), steps=3)
    assert [v for _, v in ints] == [0, 3, 4, 7] and all(isinstance(v, int) for _, v in ints)
    choice = W.control_values(ipw.Dropdown(options=[("A", "a"), ("B", "b"), ("C", "c")], value="b"))
    assert choice == [("A", "a"), ("B", "b"), ("C", "c")]
    assert W.control_values(ipw.Checkbox(value=True)) == [] and W.control_values(ipw.Text()) == []


def test_frames_figure_holds_every_figure_and_starts_at_the_active_one():
    figs = [go.Figure(go.Scatter(x=[0, 1], y=[v, 2 * v]), layout=dict(title=f"m = {v}")) for v in (1, 2, 3)]
    fig = W.frames_figure(figs, ["1", "2", "3"], active=1, description="m")
    assert fig.data[0].y == (2, 4) and [f.name for f in fig.frames] == ["0", "1", "2"]
    assert [f.data[0].y for f in fig.frames] == [(1, 2), (2, 4), (3, 6)]
    assert fig.frames[2].layout.title.text == "m = 3"  # a frame carries its layout too
    (slider,) = fig.layout.sliders
    assert slider.active == 1 and [s.label for s in slider.steps] == ["1", "2", "3"]
    assert [list(s.args[0]) for s in slider.steps] == [["0"], ["1"], ["2"]] and slider.steps[0].method == "animate"
    with pytest.raises(ValueError, match="active"):
        W.frames_figure(figs, ["1", "2", "3"], active=3, description="m")


def test_book_figures_evaluate_draw_over_the_main_control_only():
    calls = []

    def draw(m: float, label: str) -> tuple[go.Figure, go.Figure]:
        calls.append((m, label))
        return go.Figure(go.Bar(y=[m])), go.Figure(go.Bar(y=[-m]))

    box = W.explorer({"label": ipw.Dropdown(options=["x", "y"], value="y"),
                      "m": ipw.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.5)}, draw, name="t")
    calls.clear()
    note, figs = W.book_figures(box, steps=3)
    assert "m" in note and len(figs) == 2  # one frames figure per figure the explorer draws
    assert sorted(calls) == [(0.0, "y"), (0.5, "y"), (1.0, "y")]  # the other control as it is
    assert [f.data[0].y for f in figs[1].frames] == [(-0.0,), (-0.5,), (-1.0,)]
    assert figs[0].data[0].y == (0.5,) and box.controls["m"].value == 0.5  # the explorer is left as it was


def test_a_book_view_sets_the_other_controls_and_may_bring_its_own_slider():
    """A view whose settings change a control's options (notebook 11's "at") brings that slider's steps, its
    name and where it starts; the other controls take the view's values, the live explorer is left alone."""
    calls = []

    def draw(m: float, label: str) -> go.Figure:
        calls.append((m, label))
        return go.Figure(go.Bar(y=[m]), layout=dict(title=label))

    controls = {"label": ipw.Dropdown(options=["x", "y"], value="y"),
                "m": ipw.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.5)}
    own = W.BookView("x, on its own steps", {"label": "x", "m": 20.0}, "m", (("10", 10.0), ("20", 20.0), ("30", 30.0)),
                     "gamma")
    box = W.explorer(controls, draw, name="t", book_views=[W.BookView("as it is"), own])
    calls.clear()
    note, (fig,) = W.book_figures(box, steps=3, view=own)
    assert calls == [(10.0, "x"), (20.0, "x"), (30.0, "x")]
    assert "moves <b>gamma</b> over 3" in note and "drop-down" in note
    (slider,) = fig.layout.sliders
    assert [s.label for s in slider.steps] == ["10", "20", "30"] and slider.active == 1  # starts at the view's 20
    assert slider.currentvalue.prefix == "gamma = "
    assert box.values() == {"label": "y", "m": 0.5}
    note, (fig,) = W.book_figures(box, steps=3, view=box.book_views[0])  # a view of nothing: the notebook's setting
    assert fig.layout.sliders[0].active == 1 and [f.layout.title.text for f in fig.frames] == ["y"] * 3


@pytest.mark.parametrize("grid, value, expected", [([0.0, 0.5, 1.0], 0.5, 1), ([0.0, 0.5, 1.0], 0.8, 2),
                                                   (["a", "b"], "b", 1), (["a", "b"], "c", 0)])
def test_a_book_slider_starts_at_the_value_or_the_nearest_step(grid, value, expected):
    assert W._active(grid, value) == expected


def test_a_book_view_of_a_control_without_a_range_is_drawn_once_as_it_sets_it():
    """Notebook 09's metrics (a multi-select): each view of the drop-down is one figure of its setting."""
    pick = ipw.SelectMultiple(options=["loss", "rsum"], value=("loss",))
    views = [W.BookView("loss"), W.BookView("rsum", {"metrics": ("rsum",)})]
    box = W.explorer({"metrics": pick}, lambda metrics: go.Figure(layout=dict(title=" ".join(metrics))), name="t",
                     book_views=views)
    note, (fig,) = W.book_figures(box, view=views[1])
    assert "drawn once" in note and fig.layout.title.text == "rsum" and not fig.frames
    note, figs = W.book_figures(box, view=views[0])
    assert "first view" in note and figs == list(box.figures)
    assert W.book_bundle(box)["text/html"].count("<option>") == 2


def test_an_explorer_without_a_range_shows_its_figure(monkeypatch):
    box = W.explorer({"on": ipw.Checkbox(value=True)}, lambda on: go.Figure(go.Bar(y=[int(on)])), name="t")
    note, figs = W.book_figures(box)
    assert "first view" in note and figs == list(box.figures)


def test_in_the_book_an_explorer_displays_as_html_for_the_pages_plotly(monkeypatch):
    box, _ = explorer()
    assert "application/vnd.jupyter.widget-view+json" in box._repr_mimebundle_()  # JupyterLab: the widget
    monkeypatch.setenv("VLR_BOOK", "1")
    bundle = box._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}
    html = bundle["text/html"]
    assert html.count("plotly-graph-div") == 1 and "Plotly.newPlot" in html and "cdn.plot.ly" not in html
    assert '"sliders"' in html and "Plotly.addFrames" in html  # the slider and its frames


def test_frames_carry_only_the_traces_that_move():
    """A map that stays put under the slider (notebook 02's tangent maps) is stored once, in the figure; the
    frames name the traces they update (plotly's `traces`). When none moves, the frames keep them all."""
    figs = [go.Figure([go.Heatmap(z=[[1.0, 2.0]]), go.Bar(y=[m])], layout=dict(title=f"m = {m}")) for m in (1, 2, 3)]
    fig = W.frames_figure(figs, ["1", "2", "3"], active=0, description="m")
    assert [f.traces for f in fig.frames] == [(1,)] * 3 and [f.data[0].y for f in fig.frames] == [(1,), (2,), (3,)]
    assert [list(row) for row in fig.data[0].z] == [[1.0, 2.0]]  # drawn once, in the figure
    still = W.frames_figure([go.Figure(go.Bar(y=[1]), layout=dict(title=t)) for t in "ab"], ["a", "b"], 0, "t")
    assert [f.traces for f in still.frames] == [(0,), (0,)] and still.frames[1].layout.title.text == "b"


def test_frames_figure_pads_views_with_fewer_traces():
    figs = [go.Figure([go.Bar(y=[1]), go.Bar(y=[2])]), go.Figure([go.Bar(y=[3])])]
    fig = W.frames_figure(figs, ["two", "one"], active=1, description="metric")
    assert len(fig.data) == 2 and [len(f.data) for f in fig.frames] == [2, 2]
    assert fig.frames[1].data[1].visible is False and fig.data[1].visible is False
