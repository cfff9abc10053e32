"""vlr_lib.widgets._core: the wiring every explorer shares."""
from __future__ import annotations

import ipywidgets as ipw
import plotly.graph_objects as go
import pytest

from tests.viz.helpers import title
from vlr_lib.viz._style import shown
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
    assert shown(s.value, s.readout_format) == "60"


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
