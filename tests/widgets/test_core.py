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
