"""vlr_lib.viz.training over grids of controls, on synthetic histories and synthetic sweep tables."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from vlr_lib.viz import training as T

EPOCHS = 5


def make_history(loss0: float, rate: float, start_epoch: int = 1) -> list[dict]:
    """A history as `fit` records it (nested COCOS included); epoch 0 has no loss when start_epoch == 0."""
    out = []
    for e in range(start_epoch, EPOCHS + 1):
        rec = {
            "epoch": e,
            "loss": loss0 * math.exp(-rate * e) if e > 0 else math.nan,
            "rsum": 30 + 200 * (1 - math.exp(-rate * e)),
            "i2t_r1": 5.0 + e,
            "pos_sim": 0.1 + rate * e / 10,
            "hardneg_sim": 0.3 - rate * e / 20,
        }
        if e > 0:
            rec["cocos"] = {"i2t": {"n_queries": 16, "C_0": e}, "t2i": {"n_queries": 16, "C_0": 0}}
        out.append(rec)
    return out


@pytest.fixture(scope="module")
def histories() -> dict[str, list[dict]]:
    return {"A": make_history(100.0, 0.3), "B": make_history(5.0, 0.8, start_epoch=0), "C": make_history(60.0, 0.1)}


# --------------------------------------------------------------------------- history_frame


def test_history_frame_flattens_and_derives_the_gap(histories):
    f = T.history_frame(histories)
    assert list(dict.fromkeys(f["run"])) == ["A", "B", "C"]
    assert len(f) == EPOCHS + (EPOCHS + 1) + EPOCHS
    b = f[f["run"] == "B"]
    assert b["epoch"].tolist() == list(range(EPOCHS + 1))
    for rec, (_, row) in zip(histories["B"], b.iterrows()):
        assert row["sim_gap"] == pytest.approx(rec["pos_sim"] - rec["hardneg_sim"])
        if "cocos" in rec:
            assert row["cocos_i2t_C_0"] == rec["cocos"]["i2t"]["C_0"]
    assert math.isnan(b["cocos_i2t_C_0"].iloc[0])  # epoch 0 has no COCOS


def test_history_frame_accepts_frames_and_sorts_epochs(histories):
    shuffled = pd.DataFrame(histories["A"][::-1]).drop(columns="cocos")
    f = T.history_frame({"A": shuffled})
    assert f["epoch"].tolist() == list(range(1, EPOCHS + 1))


@pytest.mark.parametrize("bad", [{}, {"A": []}, {"A": [{"loss": 1.0}]}, []])
def test_history_frame_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="histories"):
        T.history_frame(bad)


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
    assert "B" in hidden.layout.title.text


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


# --------------------------------------------------------------------------- sweeps

MARGINS = [0.0, 0.1, 0.2, 0.4]
GAMMAS = [10.0, 30.0, 60.0, 100.0]
TEMPS = [0.05, 0.1, 0.2]
SEEDS = [0, 1, 2]


def rsum_of(m: float, g: float, seed: int) -> float:
    return 200.0 - (g - 40.0) ** 2 / 50.0 + 40.0 * m - 80 * m * m + 3.0 * seed


def sweep_table() -> pd.DataFrame:
    """A grid's runs table (the columns `grid` writes), with a known rsum per cell."""
    rows = []
    for s in SEEDS:
        for m in MARGINS:
            for g in GAMMAS:
                rows.append({"config": f"unified(gamma={g}, margin={m})", "loss": "unified", "gamma": g, "margin": m,
                             "seed": s, "rsum": rsum_of(m, g, s), "i2t_r1": 10.0 * m + g / 10 + s, "epochs": 5})
        for t in TEMPS:
            rows.append({"config": f"info_nce(temperature={t})", "loss": "info_nce", "temperature": t, "seed": s,
                         "rsum": 250.0 - 100 * abs(t - 0.1) + s, "i2t_r1": 3.0, "epochs": 5})
        rows.append({"config": "triplet_hardest", "loss": "triplet_hardest", "seed": s, "rsum": 150.0 + s,
                     "i2t_r1": 1.0, "epochs": 5})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return sweep_table()


def test_sweep_values_and_losses(runs):
    assert T.sweep_values(runs, "unified") == {"margin": MARGINS, "gamma": GAMMAS}  # epochs does not vary
    assert T.sweep_values(runs, "info_nce") == {"temperature": TEMPS}
    assert T.sweep_values(runs, "triplet_hardest") == {}
    assert T.sweep_losses(runs) == ["unified", "info_nce"]
    with pytest.raises(ValueError, match="loss"):
        T.sweep_values(runs, "smooth_ap")
    with pytest.raises(TypeError, match="runs"):
        T.sweep_values(runs.to_dict(), "unified")


def slow_slice(runs: pd.DataFrame, x: str, other: str, at: float, metric: str) -> dict[float, tuple[float, float]]:
    """Mean and sample std over seeds of each x value, by loops over the rows."""
    groups: dict[float, list[float]] = {}
    for _, row in runs.iterrows():
        if row["loss"] == "unified" and abs(row[other] - at) < 1e-12:
            groups.setdefault(row[x], []).append(row[metric])
    out = {}
    for v, ys in groups.items():
        mean = sum(ys) / len(ys)
        std = math.sqrt(sum((y - mean) ** 2 for y in ys) / (len(ys) - 1))
        out[v] = (mean, std)
    return out


@pytest.mark.parametrize("x,other,values", [("gamma", "margin", MARGINS), ("margin", "gamma", GAMMAS)])
@pytest.mark.parametrize("metric", ["rsum", "i2t_r1"])
def test_sweep_slice_matches_loops(runs, x, other, values, metric):
    for at in values:
        s = T.sweep_slice(runs, "unified", x, {other: at}, metric)
        ref = slow_slice(runs, x, other, at, metric)
        assert s[x].tolist() == sorted(ref)
        np.testing.assert_allclose(s["mean"], [ref[v][0] for v in s[x]])
        np.testing.assert_allclose(s["std"], [ref[v][1] for v in s[x]], atol=1e-12)
        assert (s["n"] == len(SEEDS)).all()


def test_sweep_slice_defaults_and_errors(runs):
    s = T.sweep_slice(runs, "unified", "gamma")  # margin held at its first value
    np.testing.assert_allclose(s["mean"], [np.mean([rsum_of(0.0, g, k) for k in SEEDS]) for g in GAMMAS])
    with pytest.raises(ValueError, match="x"):
        T.sweep_slice(runs, "unified", "temperature")
    with pytest.raises(ValueError, match="fixed"):
        T.sweep_slice(runs, "unified", "gamma", {"tau": 0.1})
    with pytest.raises(ValueError, match="metric"):
        T.sweep_slice(runs, "unified", "gamma", metric="nope")


def test_sweep_slice_tolerates_values_read_back_from_csv(runs):
    noisy = runs.copy()
    noisy["margin"] = noisy["margin"] * 3 / 3 + 1e-16  # what a round trip through text can do to 0.1
    s = T.sweep_slice(noisy, "unified", "gamma", {"margin": 0.1})
    assert len(s) == len(GAMMAS)


@pytest.mark.parametrize("x,other,values", [("gamma", "margin", MARGINS), ("margin", "gamma", GAMMAS)])
@pytest.mark.parametrize("metric", ["rsum", "i2t_r1"])
def test_sweep_figure_grid(runs, x, other, values, metric):
    previous = None
    for at in values:
        fig = T.sweep_figure(runs, "unified", x, {other: at}, metric, references=["triplet_hardest"], chance=31.6)
        bold = fig.data[-1]
        expected = T.sweep_slice(runs, "unified", x, {other: at}, metric)
        np.testing.assert_allclose(np.asarray(bold.x, float), expected[x])
        np.testing.assert_allclose(np.asarray(bold.y, float), expected["mean"])
        np.testing.assert_allclose(np.asarray(bold.error_y.array, float), expected["std"])
        assert np.isfinite(np.asarray(bold.y, float)).all()
        assert len(fig.data) == len(values)  # one faint line per other value of `other`, plus the bold one
        assert all(t.opacity < 1 for t in fig.data[:-1])
        assert f"{other} = {T.fmt(at)}" in fig.layout.title.text
        assert fig.layout.xaxis.title.text == x
        ref = [s for s in fig.layout.shapes if s.line.dash == "dash"]
        ref_value = {"rsum": np.mean([150.0 + s for s in SEEDS]), "i2t_r1": 1.0}[metric]
        assert len(ref) == 1 and ref[0].y0 == pytest.approx(ref_value)
        chance = [s for s in fig.layout.shapes if s.line.dash == "dot"]
        assert len(chance) == (metric == "rsum")
        if previous is not None:
            assert not np.allclose(previous, np.asarray(bold.y, float))  # moving the slice changes the figure
        previous = np.asarray(bold.y, float)


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
    assert list(fig.data[0].x) == [T.fmt(g) for g in GAMMAS]
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
