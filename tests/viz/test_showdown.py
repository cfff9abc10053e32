"""vlr_lib.viz.showdown over grids of control values, on synthetic showdown tables (tests/report/tables.py).

The numbers behind the figures (summaries, rankings, the GOAL matrix) are tested in
tests/report; the runner that makes the real tables in tests/experiments/test_showdown.py.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.report.tables import RULES, arr, hand_summary, synthetic_runs
from vlr_lib.report.labels import COCOS_RULES, COCOS_STATS, GROUPS, mean_std
from vlr_lib.report.layouts import goal_matrix
from vlr_lib.report.summary import cocos_summary, summarize
from vlr_lib.goal import GOAL_PAIRS, GOAL_TRIPLETS
from vlr_lib.viz import showdown as V


@pytest.fixture(scope="module")
def summary() -> pd.DataFrame:
    return summarize(synthetic_runs(), prefix="sel_")


# --------------------------------------------------------------------------- figures over control grids


def _points(fig) -> tuple[np.ndarray, np.ndarray, list]:
    xs = np.concatenate([arr(t.x) for t in fig.data if t.x is not None and len(t.x)])
    errs = np.concatenate([arr(t.error_x.array) for t in fig.data if t.x is not None and len(t.x)])
    ys = [y for t in fig.data if t.y is not None for y in t.y]
    return xs, errs, ys


@pytest.mark.parametrize("metric,group,chance", [
    (m, g, c) for m in ("rsum", "i2t_r1", "map5", "pr_auc") for g in GROUPS for c in (None, 20.0)])
def test_metric_errorbars_over_controls(summary, metric, group, chance):
    fig = V.metric_errorbars(summary, metric, group, chance)
    part = summary if group == "all" else summary[summary["loss"].str.startswith("goal:") == (group == "GOAL")]
    xs, errs, ys = _points(fig)
    assert len(xs) == len(part) and np.isfinite(xs).all() and np.isfinite(errs).all()
    assert sorted(xs) == pytest.approx(sorted(part[f"{metric}_mean"]))
    best = fig.data[0]
    assert len(best.x) == 1 and best.x[0] == pytest.approx(part[f"{metric}_mean"].max())
    lo, hi = fig.layout.xaxis.range  # zoomed to the bars, never stretched to chance
    low, high = (xs - errs).min(), (xs + errs).max()
    assert lo <= low and hi >= high and hi - lo == pytest.approx(1.1 * (high - low))
    if chance is not None:
        drawn = any(getattr(s, "x0", None) == chance for s in fig.layout.shapes)
        noted = [a.text for a in fig.layout.annotations if "off the axis" in (a.text or "")]
        side = "←" if chance < lo else "→"
        off = [f"{side} chance {chance:.1f}, off the axis"]
        assert (drawn, noted) == ((True, []) if lo <= chance <= hi else (False, off))
    # the y order puts the best at the top (categoryarray is bottom-to-top)
    assert list(fig.layout.yaxis.categoryarray)[-1] == best.y[0]


@pytest.mark.parametrize("chance, drawn, note", [(30.0, False, "← chance 30.0, off the axis"), (509.0, True, None),
                                                  (600.0, False, "→ chance 600.0, off the axis")])
def test_metric_errorbars_zoom_to_the_contestants_not_to_chance(chance, drawn, note):
    """Notebook 10: 24 trained losses a few rsum points apart, chance far below. The axis spans the bars and 5%
    of their span each side; chance is a dotted line where it falls among them, else a note on its side."""
    means = {f"loss_{k}": 505.0 + k for k in range(10)}
    fig = V.metric_errorbars(hand_summary(means, dict.fromkeys(means, 0.5)), chance=chance)
    np.testing.assert_allclose(fig.layout.xaxis.range, [504.5 - 0.05 * 10, 514.5 + 0.05 * 10])
    assert any(getattr(s, "x0", None) == chance for s in fig.layout.shapes) == drawn
    assert [a.text for a in fig.layout.annotations if "chance" in (a.text or "")] == [note or f"chance {chance:.1f}"]


def test_metric_errorbars_colours_follow_the_noise_rule():
    s = hand_summary({"a_loss": 10.0, "b_loss": 8.5, "c_loss": 2.0}, {"a_loss": 1.0, "b_loss": 1.0, "c_loss": 1.0})
    fig = V.metric_errorbars(s)
    assert [len(t.x) for t in fig.data] == [1, 1, 1]
    assert [t.name for t in fig.data] == ["best", "bar overlaps the best's", "bar clear of the best's"]
    assert fig.data[2].x[0] == 2.0


def test_metric_errorbars_changes_with_controls_and_rejects_bad_ones(summary):
    a, b = V.metric_errorbars(summary, "rsum"), V.metric_errorbars(summary, "t2i_r5")
    assert not np.allclose(np.sort(_points(a)[0]), np.sort(_points(b)[0]))
    assert len(_points(V.metric_errorbars(summary, "rsum", "GOAL"))[0]) == 15
    with pytest.raises(ValueError, match="^group"):
        V.metric_errorbars(summary, "rsum", "triplets")
    with pytest.raises(ValueError, match="^metric"):
        V.metric_errorbars(summary, "R@1")


@pytest.mark.parametrize("metric,color", [(m, c) for m in ("r1", "rsum", "map5", "pr_auc", "t2i_r10")
                                          for c in ("mean", "delta")])
def test_goal_heatmaps_over_controls(summary, metric, color):
    fig = V.goal_heatmaps(summary, metric, color)
    heat = [t for t in fig.data if t.type == "heatmap"]
    marks = [s for s in fig.layout.shapes if (s.name or "").startswith("best ")]
    panels = ["i2t_r1", "t2i_r1"] if metric == "r1" else [metric]
    assert len(heat) == len(marks) == len(fig.data) == len(panels)
    for h, mark, m in zip(heat, marks, panels):
        mean, std = goal_matrix(summary, m)
        z = arr(h.z)
        assert z.shape == (5, 3) and np.isfinite(z).all()
        np.testing.assert_allclose(z, mean - mean[0, 0] if color == "delta" else mean)
        if color == "delta":  # one diverging scale shared by the panels, centred on the baseline
            axis = fig.layout.coloraxis
            assert z[0, 0] == 0 and axis.cmid == 0 and axis.cmin == -axis.cmax >= -1e9 and axis.cmax >= np.abs(z).max()
        assert h.coloraxis == "coloraxis"
        i, j = np.unravel_index(np.argmax(mean), mean.shape)
        assert mark.name == f"best {m}" and (mark.x0, mark.x1, mark.y0, mark.y1) == (j - 0.5, j + 0.5, i - 0.5, i + 0.5)
        assert (mark.xref, mark.yref) == (h.xaxis, h.yaxis)  # the frame sits on its own panel
        assert h.text[0][0].startswith(mean_std(mean[0, 0], std[0, 0], m)) and "Triplet-SH" in h.text[0][0]
        assert "Circle" in h.text[GOAL_PAIRS.index("lin")][GOAL_TRIPLETS.index("cir")]
        assert list(h.y) == [f"P<sup>{p}</sup>" for p in GOAL_PAIRS]
        assert list(h.x) == [f"T<sup>{t}</sup>" for t in GOAL_TRIPLETS]


def test_goal_heatmaps_bad_controls(summary):
    with pytest.raises(ValueError, match="^color"):
        V.goal_heatmaps(summary, "r1", "std")
    with pytest.raises(ValueError, match="^metric"):
        V.goal_heatmaps(summary, "r5")


@pytest.mark.parametrize("stat", COCOS_STATS)
def test_cocos_summary_and_heatmap(stat):
    runs = synthetic_runs()
    table = cocos_summary(runs, stat)
    assert table.shape == (24, 8)  # the showdown's 24 configurations
    assert list(table.columns) == [f"{COCOS_RULES[r]} {d}" for r in RULES for d in ("i2t", "t2i")]
    assert table.index[1] == "Triplet-SH"
    expected = runs[runs["loss"] == "smooth_ap"][f"sel_cocos_triplet_t2i_{stat}"].mean()
    got = table.loc["SmoothAP", "Triplet t2i"]
    assert (np.isnan(expected) and np.isnan(got)) or got == pytest.approx(expected)
    fig = V.cocos_heatmap(table, stat)
    z = arr(fig.data[0].z)
    finite = np.isfinite(z)
    assert z.shape == (24, 8) and (z[finite] >= 0).all() and (z[finite] <= 1 + 1e-12).all()
    assert finite.any(axis=0).sum() == (2 if stat.startswith("W") else 8)  # W only exists for NT-Xent
    assert fig.data[0].text[0][0] == ("" if np.isnan(table.iloc[0, 0]) else f"{table.iloc[0, 0]:.2f}")
    with pytest.raises(ValueError, match="^stat"):
        cocos_summary(runs, "C_B")




def test_the_title_names_the_checkpoint_shown(summary):
    """The explorer's checkpoint toggle must show in the figure even when every run's last epoch is its best."""
    fig = V.metric_errorbars(summary, "rsum", checkpoint="last epoch")
    assert fig.layout.title.text.startswith("rsum per loss, mean ± std over seeds (all, last epoch)")
    assert "epoch" not in V.metric_errorbars(summary, "rsum").layout.title.text
