"""vlr_lib.widgets.showdown: every control reaches its figure (no browser: set .value, read fig.data)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from tests.viz.helpers import title
from vlr_lib.report.labels import GROUPS, METRIC_LABELS
from vlr_lib.report.layouts import goal_matrix
from vlr_lib.report.summary import cocos_summary, summarize
from vlr_lib.widgets import showdown as W

from tests.report.tables import synthetic_runs


def arr(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def xs(fig) -> np.ndarray:
    return np.sort(np.concatenate([arr(t.x) for t in fig.data if t.x is not None and len(t.x)]))


@pytest.fixture(scope="module")
def runs():
    return synthetic_runs()


def test_showdown_explorer_layout_and_initial_figure(runs):
    box = W.showdown_explorer(runs, chance=30.0)
    assert set(box.controls) == {"metric", "group", "checkpoint"}
    assert isinstance(box.figure, go.Figure) and "vlr-explorer-showdown" in box._dom_classes
    np.testing.assert_allclose(xs(box.figure), np.sort(summarize(runs, prefix="sel_")["rsum_mean"]))
    # chance on rsum: far below the trained losses, so a note at the axis, which spans the losses alone
    assert "← chance 30.0, off the axis" in [a.text for a in box.figure.layout.annotations]
    assert box.figure.layout.xaxis.range[0] > 30.0


@pytest.mark.parametrize("metric", ["i2t_r1", "map5", "pr_auc", "t2i_r10"])
def test_showdown_explorer_metric(runs, metric):
    box = W.showdown_explorer(runs, chance=30.0)
    box.controls["metric"].value = metric
    np.testing.assert_allclose(xs(box.figure), np.sort(summarize(runs, prefix="sel_")[f"{metric}_mean"]))
    assert not any(getattr(s, "x0", None) == 30.0 for s in box.figure.layout.shapes)  # no chance off rsum
    assert not [a for a in box.figure.layout.annotations if "chance" in (a.text or "")]
    assert METRIC_LABELS[metric] in title(box.figure)


def test_showdown_explorer_group_and_checkpoint(runs):
    box = W.showdown_explorer(runs)
    box.controls["group"].value = "GOAL"
    assert len(xs(box.figure)) == 15
    box.controls["group"].value = "closed-form"
    assert len(xs(box.figure)) == 9  # the closed-form contestants
    box.controls["checkpoint"].value = "test_"
    last = summarize(runs, prefix="test_")
    np.testing.assert_allclose(xs(box.figure), np.sort(last[~last["loss"].str.startswith("goal:")]["rsum_mean"]))


def test_showdown_explorer_without_last_epoch_columns(runs):
    box = W.showdown_explorer(runs.drop(columns=[c for c in runs.columns if c.startswith("test_")]))
    assert [v for _, v in box.controls["checkpoint"].options] == ["sel_"]
    with pytest.raises(ValueError, match="^runs"):
        W.showdown_explorer(runs[["config", "loss", "seed"]])


def test_the_book_shows_every_group_at_every_checkpoint_over_the_metrics(runs):
    from vlr_lib.widgets._core import book_figures

    box = W.showdown_explorer(runs, chance=30.0)
    views = {(v.values["group"], v.values["checkpoint"]): v for v in box.book_views}
    assert set(views) == {(g, p) for g in GROUPS for p in ("sel_", "test_")}
    assert {v.main for v in box.book_views} == {None} and box.main == "metric"
    _, (fig,) = book_figures(box, steps=3, view=views["GOAL", "test_"])
    last = summarize(runs, prefix="test_")
    goal = last[last["loss"].str.startswith("goal:")]
    for frame, step in zip(fig.frames, fig.layout.sliders[0].steps):
        metric = {label: m for m, label in METRIC_LABELS.items()}[step.label]
        shown = np.sort(np.concatenate([arr(t.x) for t in frame.data if t.x is not None and len(t.x)]))
        np.testing.assert_allclose(shown, np.sort(goal[f"{metric}_mean"]))
    assert box.values()["group"] == "all"  # the live explorer is left as it was
    colours = {v.values["color"] for v in W.goal_explorer(runs).book_views}
    assert colours == {"mean", "delta"}


def test_goal_explorer_switches_panels_and_colour(runs):
    box = W.goal_explorer(runs)
    heat = lambda: [t for t in box.figure.data if t.type == "heatmap"]  # noqa: E731
    assert len(heat()) == 2
    summary = summarize(runs, prefix="sel_")
    np.testing.assert_allclose(arr(heat()[1].z), goal_matrix(summary, "t2i_r1")[0])
    box.controls["metric"].value = "rsum"
    assert len(heat()) == 1
    np.testing.assert_allclose(arr(heat()[0].z), goal_matrix(summary, "rsum")[0])
    box.controls["color"].value = "delta"
    z = arr(heat()[0].z)
    assert z[0, 0] == 0 and box.figure.layout.coloraxis.cmid == 0
    box.controls["checkpoint"].value = "test_"
    mean = goal_matrix(summarize(runs, prefix="test_"), "rsum")[0]
    np.testing.assert_allclose(arr(heat()[0].z), mean - mean[0, 0])
    box.controls["metric"].value = "r1"
    assert len(heat()) == 2 and "i2t R@1" in [a.text for a in box.figure.layout.annotations]


def test_cocos_explorer_statistic(runs):
    box = W.cocos_explorer(runs)
    assert box.figure.data[0].text[0][0] == f"{cocos_summary(runs, 'C_q').iloc[0, 0]:.2f}"
    box.controls["stat"].value = "W_pos"
    table = cocos_summary(runs, "W_pos")
    row = list(table.index).index("NT-Xent")
    col = list(table.columns).index("NT-Xent i2t")
    assert box.figure.data[0].text[row][col] == f"{table.iloc[row, col]:.2f}"
    assert "W_pos" in title(box.figure)
