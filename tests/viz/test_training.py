"""vlr_lib.viz.training over grids of controls, on synthetic histories and synthetic sweep tables."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from tests.viz.helpers import title
from tests.report.tables import GAMMAS, MARGINS, SEEDS, TEMPS, make_history, rsum_of, sweep_table
from vlr_lib.report.sweeps import sweep_slice
from vlr_lib.viz import training as T
from vlr_lib.viz.readout import fmt


@pytest.fixture(scope="module")
def histories() -> dict[str, list[dict]]:
    return {"A": make_history(100.0, 0.3), "B": make_history(5.0, 0.8, start_epoch=0), "C": make_history(60.0, 0.1)}


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return sweep_table()


# --------------------------------------------------------------------------- curves_figure


METRIC_SETS = [("loss",), ("loss", "rsum"), ("rsum", "sim_gap", "pos_sim"), ("i2t_r1", "hardneg_sim")]
RUN_SETS = [None, ["A"], ["C", "B"], []]


@pytest.mark.parametrize("metrics", METRIC_SETS)
@pytest.mark.parametrize("runs", RUN_SETS)
@pytest.mark.parametrize("relative", [True, False])
def test_curves_figure_grid(histories, metrics, runs, relative):
    fig = T.curves_figure(histories, metrics, runs, relative_loss=relative, chance=31.6)
    assert isinstance(fig, go.Figure)
    assert len(fig.data) == len(metrics) * 3  # every run in every panel; hidden ones invisible
    shown = set(histories) if runs is None else set(runs)
    for k, metric in enumerate(metrics):
        for j, name in enumerate(histories):
            tr = fig.data[k * 3 + j]
            assert tr.name == name and tr.visible == (name in shown)
            hist = histories[name]
            np.testing.assert_array_equal(tr.x, [r["epoch"] for r in hist])
            y = np.asarray(tr.y, dtype=float)
            if metric == "sim_gap":
                expected = [r["pos_sim"] - r["hardneg_sim"] for r in hist]
            else:
                expected = [r[metric] for r in hist]
                if metric == "loss" and relative:
                    first = next(v for v in expected if not math.isnan(v))
                    expected = [v / first for v in expected]
            np.testing.assert_allclose(y, expected, equal_nan=True)
            assert np.isfinite(y[[r["epoch"] > 0 for r in hist]]).all()
    # the chance line sits on the rsum panel only
    chance_lines = [s for s in fig.layout.shapes if s.type == "line" and s.y0 == pytest.approx(31.6)]
    assert len(chance_lines) == ("rsum" in metrics)


def test_curves_relative_loss_starts_at_one(histories):
    fig = T.curves_figure(histories, ("loss",), relative_loss=True)
    for tr in fig.data:
        y = np.asarray(tr.y, dtype=float)
        assert y[np.isfinite(y)][0] == pytest.approx(1.0)
        assert (y[np.isfinite(y)] <= 1.0 + 1e-12).all()  # these losses decrease
    raw = T.curves_figure(histories, ("loss",), relative_loss=False)
    assert raw.data[0].y[0] == pytest.approx(histories["A"][0]["loss"])


def test_curves_controls_change_the_figure(histories):
    base = T.curves_figure(histories, ("loss", "rsum"))
    other_metric = T.curves_figure(histories, ("loss", "pos_sim"))
    assert not np.allclose(np.asarray(base.data[3].y, float), np.asarray(other_metric.data[3].y, float))
    hidden = T.curves_figure(histories, ("loss", "rsum"), runs=["B"])
    assert [t.visible for t in hidden.data] != [t.visible for t in base.data]
    assert "B" in title(hidden)


def test_curves_without_metrics_and_bad_runs(histories):
    assert len(T.curves_figure(histories, ()).data) == 0
    with pytest.raises(ValueError, match="runs"):
        T.curves_figure(histories, ("rsum",), runs=["nope"])


def test_curves_colours_are_tied_to_runs(histories):
    fig = T.curves_figure(histories, ("rsum",), runs=["C"])
    colours = {t.name: t.line.color for t in fig.data}
    assert colours == T.run_colors(list(histories))
    assert len(set(colours.values())) == 3


# --------------------------------------------------------------------------- similarity_figure


@pytest.mark.parametrize("runs", [None, ["B"], ["C", "A"]])
def test_similarity_figure_grid(histories, runs):
    fig = T.similarity_figure(histories, runs)
    names = list(histories) if runs is None else runs
    assert len(fig.data) == 2 * len(names)
    for k, name in enumerate(names):
        neg, pos = fig.data[2 * k], fig.data[2 * k + 1]
        np.testing.assert_allclose(np.asarray(pos.y, float), [r["pos_sim"] for r in histories[name]])
        np.testing.assert_allclose(np.asarray(neg.y, float), [r["hardneg_sim"] for r in histories[name]])
        assert pos.fill == "tonexty"  # the band between the two curves
    assert [a.text for a in fig.layout.annotations][: len(names)] == names


def test_similarity_figure_needs_the_similarities():
    with pytest.raises(ValueError, match="pos_sim"):
        T.similarity_figure({"A": [{"epoch": 1, "loss": 1.0}]})


@pytest.mark.parametrize("x,other,values", [("gamma", "margin", MARGINS), ("margin", "gamma", GAMMAS)])
@pytest.mark.parametrize("metric", ["rsum", "i2t_r1"])
def test_sweep_figure_grid(runs, x, other, values, metric):
    previous = None
    for at in values:
        fig = T.sweep_figure(runs, "unified", x, {other: at}, metric, references=["triplet_hardest"], chance=31.6)
        bold = fig.data[-1]
        expected = sweep_slice(runs, "unified", x, {other: at}, metric)
        np.testing.assert_allclose(np.asarray(bold.x, float), expected[x])
        np.testing.assert_allclose(np.asarray(bold.y, float), expected["mean"])
        np.testing.assert_allclose(np.asarray(bold.error_y.array, float), expected["std"])
        assert np.isfinite(np.asarray(bold.y, float)).all()
        assert len(fig.data) == len(values)  # one faint line per other value of `other`, plus the bold one
        assert all(t.opacity < 1 for t in fig.data[:-1])
        assert f"{other} = {fmt(at)}" in title(fig)
        assert fig.layout.xaxis.title.text == x
        ref = [s for s in fig.layout.shapes if s.line.dash == "dash"]
        ref_value = {"rsum": np.mean([150.0 + s for s in SEEDS]), "i2t_r1": 1.0}[metric]
        assert len(ref) == 1 and ref[0].y0 == pytest.approx(ref_value)
        # the y-axis fits what is drawn (every slice, the bold one's bars, the reference), never chance (31.6,
        # far below the synthetic rsums): a note on its side says where chance is
        drawn = np.concatenate([np.asarray(t.y, float) for t in fig.data] + [
            np.asarray(bold.y, float) + s * np.asarray(bold.error_y.array, float) for s in (-1, 1)] + [[ref[0].y0]])
        lo, hi = fig.layout.yaxis.range
        pad = 0.05 * np.ptp(drawn)
        assert (lo, hi) == pytest.approx((drawn.min() - pad, drawn.max() + pad))
        assert not [s for s in fig.layout.shapes if s.line.dash == "dot"]
        notes = [a.text for a in fig.layout.annotations if "off the axis" in (a.text or "")]
        assert notes == (["↓ chance 31.6, off the axis"] if metric == "rsum" else [])
        if previous is not None:
            assert not np.allclose(previous, np.asarray(bold.y, float))  # moving the slice changes the figure
        previous = np.asarray(bold.y, float)


def test_sweep_figure_draws_chance_only_among_its_values(runs):
    y = np.asarray(T.sweep_figure(runs, "info_nce", "temperature").data[0].y, float)
    among = float(y.mean())
    fig = T.sweep_figure(runs, "info_nce", "temperature", chance=among)
    assert [s.y0 for s in fig.layout.shapes if s.line.dash == "dot"] == [among]
    assert not [a for a in fig.layout.annotations if "off the axis" in (a.text or "")]
    above = T.sweep_figure(runs, "info_nce", "temperature", chance=1e4)
    assert above.layout.yaxis.range[1] < 1e3
    assert "↑ chance 10000.0, off the axis" in [a.text for a in above.layout.annotations]


def test_sweep_figure_one_parameter_and_log_axis(runs):
    fig = T.sweep_figure(runs, "info_nce", "temperature")
    assert len(fig.data) == 1 and fig.layout.xaxis.type != "log"  # 0.05..0.2 spans only 4x
    np.testing.assert_allclose(np.asarray(fig.data[0].y, float),
                               [np.mean([250 - 100 * abs(t - 0.1) + s for s in SEEDS]) for t in TEMPS])
    assert T.sweep_figure(runs, "info_nce", "temperature", log_x=True).layout.xaxis.type == "log"
    spread = runs.copy()
    mask = spread["loss"] == "info_nce"
    spread.loc[mask, "temperature"] = spread.loc[mask, "temperature"].map({0.05: 0.001, 0.1: 0.01, 0.2: 0.5})
    assert T.sweep_figure(spread, "info_nce", "temperature").layout.xaxis.type == "log"


def test_sweep_heatmap(runs):
    fig = T.sweep_heatmap(runs, "unified", "gamma", "margin")
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (len(MARGINS), len(GAMMAS))
    for i, m in enumerate(MARGINS):
        for j, g in enumerate(GAMMAS):
            assert z[i, j] == pytest.approx(np.mean([rsum_of(m, g, s) for s in SEEDS]))
    i, j = np.unravel_index(np.argmax(z), z.shape)
    (box,) = fig.layout.shapes
    assert (box.x0 + 0.5, box.y0 + 0.5) == (j, i)
    assert list(fig.data[0].x) == [fmt(g) for g in GAMMAS]
    other = T.sweep_heatmap(runs, "unified", "gamma", "margin", metric="i2t_r1")
    assert not np.allclose(np.asarray(other.data[0].z, float), z)
    with pytest.raises(ValueError, match="x and y"):
        T.sweep_heatmap(runs, "unified", "gamma", "gamma")
    with pytest.raises(ValueError, match="y"):
        T.sweep_heatmap(runs, "unified", "gamma", "temperature")


def test_sweep_heatmap_leaves_missing_cells_empty(runs):
    partial = runs[~((runs["loss"] == "unified") & (runs["margin"] == 0.4) & (runs["gamma"] == 100.0))]
    z = np.asarray(T.sweep_heatmap(partial, "unified", "gamma", "margin").data[0].z, dtype=float)
    assert np.isnan(z[MARGINS.index(0.4), GAMMAS.index(100.0)]) and np.isfinite(z).sum() == z.size - 1

