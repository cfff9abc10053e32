"""vlr_lib.widgets.goal: every control reaches its figure (no browser: set .value, read fig.data)."""
from __future__ import annotations

import ipywidgets as ipw
import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from tests.viz.helpers import title
from tests.widgets.helpers import live

from vlr_lib import goal as G
from vlr_lib.viz import goal as V
from vlr_lib.widgets import goal as W


def arr(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def small_S(n: int = 5, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, n, generator=g, dtype=torch.float64) * 2 - 1


@pytest.fixture(scope="module")
def composer():
    return W.goal_composer(small_S(), config=G.GoalConfig("cir", "sig-ms"), n=9)


def surface_z(box) -> np.ndarray:
    return np.stack([arr(box.figures[0].data[0].z), arr(box.figures[0].data[1].z)])


def grad_z(box) -> np.ndarray:
    return arr(box.figures[1].data[0].z)


def test_composer_layout_and_initial_state(composer):
    assert set(composer.controls) == {"triplet", "pair", "margin", "tau", "alpha", "beta", "lam", "ms_form", "rel"}
    surface, grad = composer.figures
    assert isinstance(surface, go.Figure) and isinstance(grad, go.Figure) and composer.figure is surface
    assert sum(isinstance(c, ipw.Output) for c in composer.children) == 2  # one output per figure
    assert "vlr-explorer-goal" in composer._dom_classes
    S = small_S()
    np.testing.assert_allclose(grad_z(composer), G.goal_gradient(S, "cir", "sig-ms").numpy())
    sp, sn = G.batch_triplets(S)
    np.testing.assert_allclose(arr(surface.data[2].x), sp)
    np.testing.assert_allclose(arr(surface.data[2].y), sn)


@pytest.mark.parametrize(
    "triplet,pair,control,value",
    [
        ("con", "con", "margin", 0.6),
        ("nca", "con", "tau", 3.0),
        ("cir", "sig", "alpha", 6.0),
        ("con", "sig", "beta", 30.0),
        ("nca", "sig-ms", "lam", 0.1),
        ("con", "sig-ms", "ms_form", "printed"),
    ],
)
def test_composer_slider_updates_both_figures(composer, triplet, pair, control, value):
    composer.controls["triplet"].value = triplet
    composer.controls["pair"].value = pair
    assert not composer.controls[control].disabled
    before_s, before_g = surface_z(composer), grad_z(composer)
    old = composer.controls[control].value
    composer.controls[control].value = value
    try:
        params = {k: composer.controls[k].value for k in ("margin", "tau", "alpha", "beta", "lam", "ms_form")}
        if control != "ms_form":  # the reading of eq. 12 changes the batch's m, not the surface's fixed m
            assert not np.allclose(surface_z(composer), before_s)
        expect = G.goal_gradient(small_S(), triplet, pair, **params).numpy()
        np.testing.assert_allclose(grad_z(composer), expect)
        assert not np.allclose(expect, before_g)
    finally:
        composer.controls[control].value = old


def test_composer_dropdowns_update_figures_and_readout(composer):
    for triplet, pair in [("con", "con"), ("nca", "con"), ("cir", "lin"), ("cir", "sig-ms"), ("nca", "lin-ms")]:
        composer.controls["triplet"].value = triplet
        composer.controls["pair"].value = pair
        np.testing.assert_allclose(grad_z(composer), G.goal_gradient(small_S(), triplet, pair).numpy())
        ref = V.weight_surface(G.GoalConfig(triplet, pair), n=9, rel=composer.controls["rel"].value)
        np.testing.assert_allclose(surface_z(composer)[0], arr(ref.data[0].z))
        assert f"({triplet}, {pair})" in composer.figures[0].layout.title.text
        readout = title(composer.figures[1])  # computed by the library, not read off a trace
        G_ref = G.goal_gradient(small_S(), triplet, pair)
        assert G.TABLE1[(triplet, pair)] in readout and f"non-zero on {int((G_ref != 0).sum())} of 25" in readout


def test_composer_disables_unused_sliders(composer):
    c = composer.controls
    c["triplet"].value, c["pair"].value = "con", "con"
    assert not c["margin"].disabled and c["tau"].disabled
    assert c["alpha"].disabled and c["beta"].disabled and c["lam"].disabled and c["rel"].disabled
    assert c["ms_form"].disabled
    c["triplet"].value, c["pair"].value = "cir", "sig-ms"
    assert c["margin"].disabled and not c["tau"].disabled
    assert not (c["alpha"].disabled or c["beta"].disabled or c["lam"].disabled or c["rel"].disabled)
    assert not c["ms_form"].disabled
    c["pair"].value = "lin-ms"
    assert c["alpha"].disabled and not c["rel"].disabled and c["ms_form"].disabled


def test_composer_rel_moves_the_surface_only(composer):
    composer.controls["triplet"].value, composer.controls["pair"].value = "nca", "sig-ms"
    s0, g0 = surface_z(composer), grad_z(composer)
    composer.controls["rel"].value = 1.0
    assert not np.allclose(surface_z(composer), s0)
    np.testing.assert_array_equal(grad_z(composer), g0)  # the batch's m comes from the batch


def test_composer_default_batch_and_pos_mask():
    box = W.goal_composer(n=5)
    assert arr(box.figures[1].data[0].z).shape == (8, 8)
    ids = torch.tensor([0, 1, 2, 1, 4])
    mask = ids[:, None] == ids[None, :]
    box = W.goal_composer(small_S(), pos_mask=mask, config=G.GoalConfig("con", "con"), n=5)
    np.testing.assert_allclose(arr(box.figures[1].data[0].z),
                               G.goal_gradient(small_S(), "con", "con", pos_mask=mask).numpy())
    assert len(box.figures[1].data[1].x) == int(mask.sum())
    with pytest.raises(TypeError, match="config"):
        W.goal_composer(small_S(), config="cir,sig-ms")


def test_triplet_explorer_sliders():
    box = W.triplet_explorer(n=11)
    fig = live(box)
    z = lambda k: arr(fig.data[k].z)  # noqa: E731  (panels con, nca, cir)
    con, nca, cir = z(0), z(1), z(2)
    box.controls["tau"].value = 25.0
    np.testing.assert_array_equal(z(0), con)
    assert not np.allclose(z(1), nca) and not np.allclose(z(2), cir)
    np.testing.assert_allclose(z(1), arr(V.triplet_diagrams(0.2, 25.0, 11).data[1].z))
    box.controls["margin"].value = 0.5
    assert not np.array_equal(z(0), con)
    assert "m = 0.50" in title(fig) and "τ = 25" in title(fig)


@pytest.mark.parametrize("control,value", [("alpha", 6.0), ("beta", 25.0), ("lam", 0.0), ("rel", 0.5)])
def test_pair_weight_explorer_sliders(control, value):
    box = W.pair_weight_explorer()
    fig = live(box)
    before = [arr(t.y) for t in fig.data]
    box.controls[control].value = value
    after = [arr(t.y) for t in fig.data]
    assert any(not np.allclose(a, b) for a, b in zip(after, before))
    kw = dict(alpha=2.0, beta=10.0, lam=0.5, rel=0.1) | {control: value}
    for trace, ref in zip(fig.data, V.pair_weight_curves(**kw).data):
        np.testing.assert_allclose(arr(trace.y), arr(ref.y))
