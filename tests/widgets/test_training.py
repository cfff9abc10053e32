"""vlr_lib.widgets.training: the controls redraw the stored histories and sweep tables in place."""
from __future__ import annotations

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go
import pytest

from tests.viz.helpers import title
from tests.report.tables import GAMMAS, MARGINS, make_history, sweep_table
from tests.widgets.helpers import find, live
from vlr_lib.report.sweeps import sweep_slice
from vlr_lib.viz import training as V
from vlr_lib.viz.readout import fmt
from vlr_lib.widgets.training import sweep_explorer, training_explorer


@pytest.fixture
def histories() -> dict[str, list[dict]]:
    return {"Triplet-HN": make_history(80.0, 0.2), "VLC": make_history(8.0, 0.7, start_epoch=0),
            "Unified": make_history(60.0, 0.4)}


@pytest.fixture(scope="module")
def runs():
    return sweep_table()


def ys(fig) -> list[np.ndarray]:
    return [np.asarray(t.y, dtype=float) for t in fig.data]


# --------------------------------------------------------------------------- training_explorer


def test_training_explorer_layout(histories):
    box = training_explorer(histories, chance=20.0)
    assert isinstance(box.figure, go.Figure) and isinstance(box.children[-2], W.Output)
    pick = find(box, W.SelectMultiple, "metrics")
    assert box.controls["metrics"] is pick and pick.value == ("loss", "rsum")
    for name in histories:
        assert find(box, W.Checkbox, name) is box.controls[f"run:{name}"]
    expected = V.curves_figure(histories, ("loss", "rsum"), chance=20.0)
    for a, b in zip(ys(box.figure), ys(expected)):
        np.testing.assert_allclose(a, b, equal_nan=True)


@pytest.mark.parametrize("name", ["Triplet-HN", "VLC", "Unified"])
def test_checkbox_hides_a_run(histories, name):
    box = training_explorer(histories)
    fig = live(box)
    n_traces = len(fig.data)
    box.controls[f"run:{name}"].value = False
    assert [t.visible for t in fig.data if t.name == name] == [False, False]
    assert all(t.visible for t in fig.data if t.name != name)
    assert len(fig.data) == n_traces  # the run keeps its (hidden) traces: the panels do not move
    box.controls[f"run:{name}"].value = True
    assert all(t.visible for t in fig.data)


@pytest.mark.parametrize("metrics", [("rsum",), ("pos_sim", "hardneg_sim", "sim_gap"), ("loss", "i2t_r1")])
def test_metric_selection_redraws_the_panels(histories, metrics):
    box = training_explorer(histories, metrics=("loss", "rsum", "i2t_r1", "pos_sim", "hardneg_sim", "sim_gap"))
    box.controls["run:VLC"].value = False
    box.controls["metrics"].value = metrics
    fig = live(box)
    expected = V.curves_figure(histories, metrics, ["Triplet-HN", "Unified"])
    assert len(fig.data) == len(metrics) * len(histories)
    for a, b in zip(ys(fig), ys(expected)):
        np.testing.assert_allclose(a, b, equal_nan=True)
    assert [t.visible for t in fig.data] == [t.visible for t in expected.data]
    assert [a.text for a in fig.layout.annotations][: len(metrics)] == [
        ("relative " if m == "loss" else "") + V.metric_label(m) for m in metrics]


def test_no_metric_gives_an_empty_figure(histories):
    box = training_explorer(histories)
    box.controls["metrics"].value = ()
    assert len(box.figure.data) == 0 and "metric" in title(box.figure)


def test_training_explorer_rejects_unknown_shown(histories):
    with pytest.raises(ValueError, match="shown"):
        training_explorer(histories, metrics=("loss",), shown=("rsum",))


# --------------------------------------------------------------------------- sweep_explorer


def bold(fig) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(fig.data[-1].x, dtype=float), np.asarray(fig.data[-1].y, dtype=float)


def test_sweep_explorer_starts_on_gamma_at_the_middle_margin(runs):
    box = sweep_explorer(runs, references=["triplet_hardest", "not_in_table"], chance=31.6)
    c = box.controls
    assert (c["loss"].value, c["x"].value) == ("unified", "gamma")
    assert list(c["loss"].options) == ["unified", "info_nce"]
    at = find(box, W.SelectionSlider, "margin")
    assert at is c["at"] and at.value == MARGINS[len(MARGINS) // 2] and not at.disabled
    expected = V.sweep_figure(runs, "unified", "gamma", {"margin": at.value}, "rsum", ["triplet_hardest"], 31.6)
    np.testing.assert_allclose(bold(box.figure)[1], np.asarray(expected.data[-1].y, float))


@pytest.mark.parametrize("margin", MARGINS)
def test_moving_at_shows_that_slice(runs, margin):
    box = sweep_explorer(runs)
    box.controls["at"].value = margin
    s = sweep_slice(runs, "unified", "gamma", {"margin": margin})
    x, y = bold(box.figure)
    np.testing.assert_allclose(x, s["gamma"])
    np.testing.assert_allclose(y, s["mean"])
    assert f"margin = {fmt(margin)}" in title(box.figure)


def test_switching_x_resets_the_slider(runs):
    box = sweep_explorer(runs)
    c = box.controls
    c["x"].value = "margin"
    assert c["at"].description == "gamma" and list(c["at"].options) == [(fmt(g), g) for g in GAMMAS]
    c["at"].value = GAMMAS[0]
    s = sweep_slice(runs, "unified", "margin", {"gamma": GAMMAS[0]})
    np.testing.assert_allclose(bold(box.figure)[1], s["mean"])
    assert box.figure.layout.xaxis.title.text == "margin"


def test_the_book_shows_every_sweep_against_each_parameter(runs):
    """The "at" slider's options change with the sweep and the x-axis: each view of the book brings its own."""
    from vlr_lib.widgets._core import book_figures

    box = sweep_explorer(runs, chance=31.6)
    views = box.book_views
    assert [(v.values["loss"], v.values["x"], v.main) for v in views] == [
        ("unified", "gamma", "at"), ("unified", "gamma", "metric"), ("unified", "margin", "at"),
        ("info_nce", "temperature", "metric")]
    by_gamma = views[2]
    assert by_gamma.description == "gamma" and [v for _, v in by_gamma.grid] == list(GAMMAS)
    note, (fig,) = book_figures(box, view=by_gamma)
    assert "moves <b>gamma</b>" in note and len(fig.frames) == len(GAMMAS)
    for gamma, frame in zip(GAMMAS, fig.frames):
        s = sweep_slice(runs, "unified", "margin", {"gamma": gamma})
        bold_trace = frame.data[frame.traces.index(len(fig.data) - 1)]
        np.testing.assert_allclose(np.asarray(bold_trace.y, float), s["mean"])
    assert box.controls["x"].value == "gamma"  # the live explorer is left as it was


def test_switching_loss_redraws_once_with_consistent_controls(runs, monkeypatch):
    box = sweep_explorer(runs)
    c = box.controls
    calls = []
    original = V.sweep_figure

    def spy(*args, **kwargs):
        calls.append(args[1:3])
        return original(*args, **kwargs)

    monkeypatch.setattr(V, "sweep_figure", spy)
    c["loss"].value = "info_nce"
    monkeypatch.undo()
    assert calls == [("info_nce", "temperature")]  # the dependent controls were reset before one redraw
    assert c["x"].value == "temperature" and c["at"].disabled
    s = sweep_slice(runs, "info_nce", "temperature")
    np.testing.assert_allclose(bold(box.figure)[1], s["mean"])
    c["loss"].value = "unified"
    assert c["x"].value == "gamma" and not c["at"].disabled and c["at"].description == "margin"


def test_metric_dropdown(runs):
    box = sweep_explorer(runs, metrics=("rsum", "i2t_r1", "no_such_column"))
    assert [v for _, v in box.controls["metric"].options] == ["rsum", "i2t_r1"]
    before = bold(box.figure)[1]
    box.controls["metric"].value = "i2t_r1"
    s = sweep_slice(runs, "unified", "gamma", {"margin": box.controls["at"].value}, "i2t_r1")
    np.testing.assert_allclose(bold(box.figure)[1], s["mean"])
    assert not np.allclose(before, bold(box.figure)[1])


def test_sweep_explorer_rejects_bad_input(runs):
    with pytest.raises(ValueError, match="metric"):
        sweep_explorer(runs, metric="nope")
    with pytest.raises(ValueError, match="loss"):
        sweep_explorer(runs, loss="triplet_hardest")
    with pytest.raises(ValueError, match="swept"):
        sweep_explorer(runs[runs["loss"] == "triplet_hardest"])
