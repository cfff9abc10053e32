"""vlr_lib.viz.unified over grids of margins and scales."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.viz.helpers import title
from tests.core import references as ref
from vlr_lib import analysis, losses
from vlr_lib.demo import demo_embeddings
from vlr_lib.similarity import similarity
from vlr_lib.viz import unified as U

MARGINS = [0.0, 0.2, 0.5]
GAMMAS = [1.0, 10.0, 60.0, 1e4]


@pytest.fixture(scope="module")
def S() -> torch.Tensor:
    img, txt = demo_embeddings(n=8, dim=16, noise=0.8, seed=0)
    return similarity(img, txt)


def reference_gradient(S: torch.Tensor, margin: float, gamma: float) -> np.ndarray:
    X = S.detach().clone().requires_grad_()
    (grad,) = torch.autograd.grad(ref.unified(X, margin, gamma, ref.diagonal(S.shape[0])), X)
    return grad.numpy()


@pytest.mark.parametrize("margin", MARGINS)
@pytest.mark.parametrize("gamma", [1.0, 60.0, 1e4])
def test_explorer_figure_grid(S, margin, gamma):
    fig = U.explorer_figure(S, margin, gamma)
    assert len(fig.data) == 7
    curve, vlc, step, dots, heat, halo, marks = fig.data
    assert marks.name == halo.name == "positive" and list(marks.x) == list(range(8))
    for trace in (curve, vlc, dots):
        y = np.asarray(trace.y, dtype=float)
        assert np.isfinite(y).all() and (y >= 0).all() and (y <= 1).all()
    assert list(step.x)[1:3] == [-margin, -margin]
    assert tuple(fig.layout.xaxis.range) == (-1.0, 0.6)
    # the batch's weights sit on or below the one-negative curve: the other negatives share the weight
    x_dots = np.asarray(dots.x, dtype=float)
    assert x_dots.shape == (56,)
    assert (np.asarray(dots.y) <= analysis.unified_one_negative_weight(x_dots, margin, gamma).numpy() + 1e-12).all()
    if gamma < 1e3:  # at gamma = 1e4 the library is finite but the float64 reference overflows
        np.testing.assert_allclose(np.asarray(heat.z, dtype=float), reference_gradient(S, margin, gamma),
                                   rtol=1e-7, atol=1e-12)
    assert np.isfinite(np.asarray(heat.z, dtype=float)).all()
    assert f"m = {margin:.2f}" in title(fig)


def test_explorer_figure_changes_with_each_control(S):
    base = U.explorer_figure(S, 0.2, 60.0)
    for other in (U.explorer_figure(S, 0.3, 60.0), U.explorer_figure(S, 0.2, 10.0)):
        assert not np.allclose(np.asarray(base.data[0].y), np.asarray(other.data[0].y))
        assert not np.allclose(np.asarray(base.data[4].z, dtype=float), np.asarray(other.data[4].z, dtype=float))
        assert title(base) != title(other)


@pytest.mark.parametrize("margin", MARGINS)
@pytest.mark.parametrize("n", [2, 17, 50])
def test_surfaces_figure_grid(margin, n):
    fig = U.surfaces_figure(margin, n=n)
    loss, weight = fig.data
    X, LG = np.asarray(loss.x), np.asarray(loss.y)
    L, Wt = np.asarray(loss.z), np.asarray(weight.z)
    assert L.shape == Wt.shape == X.shape == (n, n)
    assert np.isfinite(L).all() and np.isfinite(Wt).all()
    G = 10.0 ** LG
    hinge = np.maximum(X + margin, 0.0)
    assert (L >= hinge - 1e-12).all() and (L - hinge <= math.log(2) / G + 1e-12).all()  # eq. 6 with a rate
    assert (Wt >= 0).all() and (Wt <= 1).all() and (np.diff(Wt, axis=1) >= 0).all()
    assert LG[0, 0] == 0.0 and LG[-1, 0] == 3.0


def test_surfaces_change_with_margin():
    a, b = U.surfaces_figure(0.0, n=10), U.surfaces_figure(0.3, n=10)
    assert not np.allclose(np.asarray(a.data[1].z), np.asarray(b.data[1].z))
    assert title(a) != title(b)


@pytest.mark.parametrize("margin", MARGINS)
def test_gamma_limit_figure_within_bound(S, margin):
    gammas = [1.0, 10.0, 100.0, 1e3, 1e4]
    fig = U.gamma_limit_figure(S, margin, gammas)
    bound, gap, resolution, *cut = fig.data
    np.testing.assert_allclose(np.asarray(bound.y, dtype=float), 2 * 8 * math.log(8) / np.array(gammas))
    drawn = len(gap.x)
    assert list(gap.x) == gammas[:drawn]  # the gammas where float64 still resolves the gap
    y = np.asarray(gap.y, dtype=float)
    floor = float(resolution.y[0])
    assert np.isfinite(y).all() and (y > floor).all() and (y <= np.asarray(bound.y[:drawn], dtype=float)).all()
    assert 0 < floor < 1e-10  # a few ulps of the loss, not an arbitrary 1e-300
    hn = float(losses.triplet_hardest(S, margin))
    for g in gammas[drawn:]:  # not drawn: below float64's resolution
        assert float(losses.unified(S, margin, g)) - hn <= floor
    assert len(cut) == (drawn < len(gammas)) and (not cut or cut[0].x[0] == gammas[drawn])
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    lo, hi = fig.layout.yaxis.range  # the y axis spans what is drawn, not 300 decades
    assert hi - lo < 20 and 10 ** lo <= min(floor, y.min()) and 10 ** hi >= float(bound.y[0])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda S: U.explorer_figure(S, 0.2, -1.0), "gamma"),
        (lambda S: U.explorer_figure(S, -0.2, 60.0), "margin"),
        (lambda S: U.explorer_figure(S, 0.2, 60.0, x_range=(1.0, 0.0)), "x_range"),
        (lambda S: U.explorer_figure(S[:, :4], 0.2, 60.0), "S"),
        (lambda S: U.surfaces_figure(0.2, n=1), "n"),
        (lambda S: U.surfaces_figure(0.2, n=81), "n"),
        (lambda S: U.surfaces_figure(0.2, x_range=(0.5, 0.5)), "x_range"),
        (lambda S: U.gamma_limit_figure(S, 0.2, [10.0]), "gammas"),
        (lambda S: U.gamma_limit_figure(S, 0.2, [10.0, 0.0]), "gammas"),
    ],
)
def test_bad_input(S, call, match):
    with pytest.raises(ValueError, match=match):
        call(S)
