"""vlr_lib.viz.goal over grids of control values.

The reference weights below are written from Xuan & Chen's equations with numpy
(eqs. 5, 7-13, with the [.]_+ clamps and Heaviside(0) = 0 documented in
vlr_lib.goal); they check that each figure shows the right numbers at the right
(S_pos, S_neg) coordinates, not only that it draws.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from tests.viz.helpers import outlines, title
from vlr_lib import goal as G
from vlr_lib.viz import goal as V

COMBOS = list(itertools.product(G.GOAL_TRIPLETS, G.GOAL_PAIRS))
PARAM_SETS = [
    dict(margin=0.2, tau=10.0, alpha=2.0, beta=10.0, lam=0.5, rel=0.1),  # the paper's defaults
    dict(margin=0.0, tau=1.0, alpha=0.5, beta=1.0, lam=-0.3, rel=1.5),
    dict(margin=0.7, tau=50.0, alpha=10.0, beta=50.0, lam=0.9, rel=0.05),
]


# --------------------------------------------------------------------------- references from the paper


def ref_T(name: str, sp: np.ndarray, sn: np.ndarray, margin: float, tau: float) -> np.ndarray:
    if name == "con":
        return (margin + sn - sp > 0).astype(float)
    if name == "nca":
        return 1.0 / (1.0 + np.exp(tau * (sp - sn)))
    return 1.0 / (1.0 + np.exp(tau * (sp * (2 - sp) - sn**2)))


def ref_P(name: str, s: np.ndarray, positive: bool, alpha: float, beta: float, lam: float, rel: float) -> np.ndarray:
    if name == "con":
        return np.ones_like(s)
    if name == "lin":
        return np.maximum(1 - s, 0) if positive else np.maximum(s, 0)
    if name == "lin-ms":
        return max(1 - rel, 0) * np.maximum(1 - s, 0) if positive else max(1 + rel, 0) * np.maximum(s, 0)
    m = 1.0 if name == "sig" else rel
    return 1.0 / (m + np.exp(alpha * (s - lam))) if positive else 1.0 / (m + np.exp(-beta * (s - lam)))


def arr(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def demo_S(n: int = 6, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, n, generator=g, dtype=torch.float64) * 2 - 1


# --------------------------------------------------------------------------- grid


@pytest.mark.parametrize("name", G.GOAL_TRIPLETS)
@pytest.mark.parametrize("margin,tau", [(0.0, 1.0), (0.2, 10.0), (0.5, 50.0)])
def test_triplet_diagram_values_and_layout(name, margin, tau):
    n = 21
    heat = V.triplet_diagrams(margin=margin, tau=tau, n=n).data[G.GOAL_TRIPLETS.index(name)]
    z, x, y = arr(heat.z), arr(heat.x), arr(heat.y)
    assert z.shape == (n, n) and np.isfinite(z).all()
    assert z.min() >= 0 and z.max() <= 1 and (heat.zmin, heat.zmax) == (0.0, 1.0)
    np.testing.assert_allclose(x, np.linspace(-1, 1, n))
    np.testing.assert_allclose(y, np.linspace(-1, 1, n))
    # z[i, j] is the weight at S_pos = x[j], S_neg = y[i] (the paper's axes); float32 for display
    np.testing.assert_allclose(z, ref_T(name, x[None, :], y[:, None], margin, tau), rtol=1e-6, atol=1e-7)
    assert heat.contours.coloring == "heatmap" and heat.contours.showlines  # colours plus iso-lines
    assert (heat.contours.start, heat.contours.end, heat.contours.size) == (0.1, 0.9, 0.1)


def test_triplet_diagrams_controls_change_the_figure():
    def z(k, **kw):
        return arr(V.triplet_diagrams(n=21, **kw).data[k].z)

    assert not np.array_equal(z(0, margin=0.0), z(0, margin=0.4))
    for k in (1, 2):  # nca, cir
        assert not np.array_equal(z(k, tau=2.0), z(k, tau=20.0))
        np.testing.assert_array_equal(z(k, margin=0.0), z(k, margin=0.9))  # margin is T^con's only
    np.testing.assert_array_equal(z(0, tau=2.0), z(0, tau=20.0))


def test_triplet_diagrams_reject_bad_input():
    with pytest.raises(ValueError, match="tau"):
        V.triplet_diagrams(tau=0.0)
    with pytest.raises(ValueError, match="margin"):
        V.triplet_diagrams(margin=-0.1)
    for bad in (1, V.MAX_GRID + 1, 2.5, True):
        with pytest.raises((ValueError, TypeError), match="^n must"):
            V.triplet_diagrams(n=bad)


@pytest.mark.parametrize("margin,tau", [(0.2, 10.0), (0.6, 3.0)])
def test_triplet_diagrams_three_panels_in_paper_order(margin, tau):
    fig = V.triplet_diagrams(margin, tau, n=15)
    heats = fig.data
    assert [t.type for t in heats] == ["contour"] * 3
    s = np.linspace(-1, 1, 15)
    for name, heat in zip(G.GOAL_TRIPLETS, heats):
        np.testing.assert_allclose(arr(heat.z), ref_T(name, s[None, :], s[:, None], margin, tau), rtol=1e-6, atol=1e-7)
    assert [bool(h.showscale) for h in heats] == [True, False, False]
    assert {fig.layout[f"xaxis{k}"].range for k in ("", "2", "3")} == {(-1, 1)}


# --------------------------------------------------------------------------- Fig. 3


@pytest.mark.parametrize(
    "alpha,beta,lam,rel",
    [(2.0, 10.0, 0.5, 0.1), (0.5, 1.0, -0.5, 1.0), (10.0, 50.0, 0.9, 2.0), (1.0, 30.0, 0.0, 0.05)],
)
def test_pair_weight_curves_values(alpha, beta, lam, rel):
    fig = V.pair_weight_curves(alpha, beta, lam, rel, n=41)
    assert len(fig.data) == 2 * len(G.GOAL_PAIRS)
    for k, name in enumerate(G.GOAL_PAIRS):
        for trace, positive in zip(fig.data[2 * k: 2 * k + 2], (True, False)):
            x, y = arr(trace.x), arr(trace.y)
            assert x.shape == y.shape == (41,) and x[0] == -1 and x[-1] == 1
            assert np.isfinite(y).all() and (y >= 0).all()
            np.testing.assert_allclose(y, ref_P(name, x, positive, alpha, beta, lam, rel), rtol=1e-6, atol=1e-7)
            if name == "sig-ms":
                assert y.max() <= (1 / rel) * (1 + 1e-6)  # m bounds the largest MS weight (eq. 12)
    assert tuple(fig.layout.xaxis.range) == (-1, 1)


def test_pair_weight_curves_controls_change_only_their_curves():
    base = V.pair_weight_curves()
    ys = lambda fig: [arr(t.y) for t in fig.data]  # noqa: E731
    idx = {(p, pos): 2 * k + (0 if pos else 1) for k, p in enumerate(G.GOAL_PAIRS) for pos in (True, False)}

    def changed(fig):
        return {key for key, i in idx.items() if not np.allclose(ys(fig)[i], ys(base)[i])}

    assert changed(V.pair_weight_curves(alpha=5.0)) == {("sig", True), ("sig-ms", True)}
    assert changed(V.pair_weight_curves(beta=30.0)) == {("sig", False), ("sig-ms", False)}
    assert changed(V.pair_weight_curves(rel=0.5)) == {("lin-ms", True), ("lin-ms", False),
                                                      ("sig-ms", True), ("sig-ms", False)}
    # m = 1 turns eq. 12 into eq. 11 (the paper's own remark)
    one = V.pair_weight_curves(rel=1.0)
    np.testing.assert_allclose(ys(one)[idx[("sig-ms", True)]], ys(one)[idx[("sig", True)]])
    np.testing.assert_allclose(ys(one)[idx[("sig-ms", False)]], ys(one)[idx[("sig", False)]])


def test_pair_weight_curves_subset_and_bad_input():
    fig = V.pair_weight_curves(pairs=("lin",), n=3)
    np.testing.assert_allclose(arr(fig.data[0].y), [2, 1, 0])
    np.testing.assert_allclose(arr(fig.data[1].y), [0, 0, 1])
    with pytest.raises(ValueError, match="pairs"):
        V.pair_weight_curves(pairs=("linear",))
    with pytest.raises(ValueError, match="pairs"):
        V.pair_weight_curves(pairs=())
    with pytest.raises(ValueError, match="rel"):
        V.pair_weight_curves(rel=0.0)  # m^sig is a mean of exponentials: > 0
    with pytest.raises(ValueError, match="alpha"):
        V.pair_weight_curves(alpha=-1.0)


# --------------------------------------------------------------------------- Table 1


def test_table1_grid_annotates_every_cell():
    fig = V.table1_grid()
    (heat,) = fig.data
    assert list(heat.x) == [f"T^{t}" for t in G.GOAL_TRIPLETS]
    assert list(heat.y) == [f"P^{p}" for p in G.GOAL_PAIRS]
    text = np.asarray(heat.text)
    assert text.shape == (5, 3)
    assert text[0, 0] == "Triplet" and text[1, 2] == "Circle" and text[4, 0] == "MS"
    assert text[2, 0] == "Binomial deviance" and text[0, 1].startswith("hard-negative NCA")
    assert (text == "New").sum() == 10
    np.testing.assert_array_equal(arr(heat.z), (text != "New").astype(float))
    assert not fig.layout.shapes


@pytest.mark.parametrize("highlight", [("con", "con"), ("cir", "sig-ms"), ("nca", "lin")])
def test_table1_grid_values_and_highlight(highlight):
    values = {key: 10.0 * G.GOAL_TRIPLETS.index(key[0]) + G.GOAL_PAIRS.index(key[1]) for key in G.TABLE1}
    fig = V.table1_grid(values=values, highlight=highlight, value_label="R@1")
    z, text = arr(fig.data[0].z), np.asarray(fig.data[0].text)
    for (t, p), v in values.items():
        i, j = G.GOAL_PAIRS.index(p), G.GOAL_TRIPLETS.index(t)
        assert z[i, j] == v and text[i, j].startswith(G.TABLE1[(t, p)]) and f"{v:.1f}" in text[i, j]
    (shape,) = fig.layout.shapes
    t, p = highlight
    assert (shape.x0 + shape.x1) / 2 == G.GOAL_TRIPLETS.index(t)
    assert (shape.y0 + shape.y1) / 2 == G.GOAL_PAIRS.index(p)


def test_table1_grid_rejects_bad_input():
    values = {key: 1.0 for key in G.TABLE1}
    with pytest.raises(ValueError, match="values"):
        V.table1_grid(values={k: v for k, v in list(values.items())[:-1]})
    with pytest.raises(ValueError, match="values"):
        V.table1_grid(values={**values, ("con", "foo"): 1.0})
    with pytest.raises(ValueError, match="values"):
        V.table1_grid(values={**values, ("con", "con"): math.nan})
    with pytest.raises(ValueError, match="highlight"):
        V.table1_grid(highlight=("cir", "circle"))


# --------------------------------------------------------------------------- weight surfaces


@pytest.mark.parametrize("triplet,pair", COMBOS)
@pytest.mark.parametrize("params", PARAM_SETS[:2], ids=["paper", "other"])
def test_weight_surface_all_combinations(triplet, pair, params):
    n = 11
    pts = (np.array([0.5, 0.8]), np.array([0.3, 0.7]))
    cfg = G.GoalConfig(triplet, pair, **{k: v for k, v in params.items() if k != "rel"})
    fig = V.weight_surface(cfg, rel=params["rel"], n=n, points=pts)
    assert [t.type for t in fig.data] == ["heatmap", "heatmap", "scatter", "scatter"]
    s = np.linspace(-1, 1, n)
    sp, sn = s[None, :], s[:, None]
    T = ref_T(triplet, sp, sn, params["margin"], params["tau"])
    kw = {k: params[k] for k in ("alpha", "beta", "lam", "rel")}
    expect = (T * ref_P(pair, sp, True, **kw), T * ref_P(pair, sn, False, **kw))
    for heat, ref in zip(fig.data[:2], expect):
        z = arr(heat.z)
        assert z.shape == (n, n) and np.isfinite(z).all() and (z >= 0).all()
        np.testing.assert_allclose(z, np.broadcast_to(ref, (n, n)), rtol=1e-6, atol=1e-7)
        assert heat.coloraxis == "coloraxis"
    top = max(arr(fig.data[0].z).max(), arr(fig.data[1].z).max())
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == pytest.approx(max(top, 1e-12))
    for scatter in fig.data[2:]:
        np.testing.assert_allclose(arr(scatter.x), pts[0])
        np.testing.assert_allclose(arr(scatter.y), pts[1])
    assert tuple(fig.layout.xaxis.range) == (-1, 1) and tuple(fig.layout.yaxis2.range) == (-1, 1)
    assert f"({triplet}, {pair})" in title(fig)


@pytest.mark.parametrize(
    "triplet,pair,control,a,b",
    [
        ("con", "con", "margin", 0.0, 0.5),
        ("nca", "con", "tau", 2.0, 30.0),
        ("cir", "lin", "tau", 2.0, 30.0),
        ("con", "sig", "alpha", 1.0, 6.0),
        ("nca", "sig", "beta", 2.0, 40.0),
        ("cir", "sig-ms", "lam", 0.0, 0.8),
        ("con", "sig-ms", "rel", 0.1, 1.0),
        ("nca", "lin-ms", "rel", 0.1, 0.9),
    ],
)
def test_weight_surface_controls_change_the_figure(triplet, pair, control, a, b):
    def z(value):
        if control == "rel":
            fig = V.weight_surface(G.GoalConfig(triplet, pair), rel=value, n=15)
        else:
            fig = V.weight_surface(G.GoalConfig(triplet, pair, **{control: value}), n=15)
        return np.stack([arr(fig.data[0].z), arr(fig.data[1].z)])

    assert not np.allclose(z(a), z(b))


def test_weight_surface_without_points_and_bad_input():
    fig = V.weight_surface(G.GoalConfig("cir", "sig-ms"), n=5)
    assert len(fig.data[2].x) == 0 and len(fig.data[3].x) == 0
    with pytest.raises(TypeError, match="config"):
        V.weight_surface("con")
    with pytest.raises(ValueError, match="^n "):
        V.weight_surface(G.GoalConfig(), n=200)
    with pytest.raises(ValueError, match="points"):
        V.weight_surface(G.GoalConfig(), points=([0.1, 0.2], [0.1]))
    with pytest.raises(ValueError, match="rel"):
        V.weight_surface(G.GoalConfig("con", "sig-ms"), rel=-0.5)


# --------------------------------------------------------------------------- a live batch


def repeated_image_mask() -> torch.Tensor:
    ids = torch.tensor([0, 1, 2, 3, 2, 5])
    return ids[:, None] == ids[None, :]


@pytest.mark.parametrize("triplet,pair", COMBOS)
@pytest.mark.parametrize("params", [PARAM_SETS[0], PARAM_SETS[2]], ids=["paper", "extreme"])
def test_gradient_heatmap_all_combinations(triplet, pair, params):
    S = demo_S(6, seed=3)
    kw = {k: v for k, v in params.items() if k != "rel"}
    fig = V.gradient_heatmap(S, G.GoalConfig(triplet, pair, **kw))
    assert [t.type for t in fig.data] == ["heatmap"] + ["scatter"] * 6  # 3 outlines, each over a halo
    z = arr(fig.data[0].z)
    assert z.shape == (6, 6) and np.isfinite(z).all()
    np.testing.assert_allclose(z, G.goal_gradient(S, triplet, pair, **kw).numpy())
    heat = fig.data[0]
    assert heat.zmid == 0.0 and heat.zmin == -heat.zmax and heat.zmax >= np.abs(z).max() and heat.zmax > 0
    marked = np.zeros((6, 6), bool)
    for trace in fig.data[1:]:
        marked[np.asarray(trace.y, int), np.asarray(trace.x, int)] = True
    assert not (z[~marked] != 0).any()  # GOAL touches positives and hardest negatives only
    assert (np.diag(z) <= 0).all()  # positives are pulled up (or left alone)
    text = title(fig)
    assert G.GoalConfig(triplet, pair).label in text and G.TABLE1[(triplet, pair)] in text
    assert f"non-zero on {int((z != 0).sum())} of 36" in text and f"{np.abs(z).max():.3g}" in text


def test_gradient_heatmap_controls_change_the_figure_and_pos_mask():
    S = demo_S(6, seed=4)
    a = arr(V.gradient_heatmap(S, G.GoalConfig("con", "con", margin=2.0)).data[0].z)
    b = arr(V.gradient_heatmap(S, G.GoalConfig("nca", "con")).data[0].z)
    c = arr(V.gradient_heatmap(S, G.GoalConfig("nca", "con", tau=1.0)).data[0].z)
    assert not np.allclose(a, b) and not np.allclose(b, c)
    mask = repeated_image_mask()
    fig = V.gradient_heatmap(S, G.GoalConfig("cir", "sig-ms"), pos_mask=mask)
    pos_trace = outlines(fig.data[1:])[0]
    assert pos_trace.name == "positive"
    assert len(pos_trace.x) == int(mask.sum())
    z = arr(fig.data[0].z)
    np.testing.assert_allclose(z, G.goal_gradient(S, "cir", "sig-ms", pos_mask=mask).numpy())


def test_gradient_heatmap_all_zero_gradient_keeps_a_valid_scale():
    S = torch.eye(4, dtype=torch.float64)  # every triplet satisfied by far: T^con = 0 everywhere
    fig = V.gradient_heatmap(S, G.GoalConfig("con", "con", margin=0.2))
    assert not arr(fig.data[0].z).any()
    assert (fig.data[0].zmin, fig.data[0].zmax) == (-1.0, 1.0)
