"""vlr_lib.viz.triplet over grids of control values, against references written from the papers."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from tests.viz.helpers import outlines
from vlr_lib import analysis, losses
from vlr_lib.demo import demo_embeddings
from vlr_lib.similarity import similarity
from vlr_lib.viz import triplet as T

# --------------------------------------------------------------------------- references (plain loops, float64)


def loop_grad_all(S: np.ndarray, m: float) -> np.ndarray:
    """d/dS of sum_i sum_{j!=i} [m - s_ii + s_ij]_+ + [m - s_ii + s_ji]_+ (Bleeker & de Rijke eq. 3)."""
    n = len(S)
    G = np.zeros_like(S)
    for i in range(n):
        for j in range(n):
            if j == i:
                continue
            if m - S[i, i] + S[i, j] > 0:  # image i, negative caption j
                G[i, j] += 1
                G[i, i] -= 1
            if m - S[i, i] + S[j, i] > 0:  # caption i, negative image j
                G[j, i] += 1
                G[i, i] -= 1
    return G


def loop_grad_hardest(S: np.ndarray, m: float) -> np.ndarray:
    """d/dS of sum_i [m + max_j s_ij - s_ii]_+ + [m + max_j s_ji - s_ii]_+ (Li et al. eq. 1)."""
    n = len(S)
    G = np.zeros_like(S)
    for i in range(n):
        j = max((j for j in range(n) if j != i), key=lambda j: S[i, j])
        if m + S[i, j] - S[i, i] > 0:
            G[i, j] += 1
            G[i, i] -= 1
        k = max((k for k in range(n) if k != i), key=lambda k: S[k, i])
        if m + S[k, i] - S[i, i] > 0:
            G[k, i] += 1
            G[i, i] -= 1
    return G


def batch(noise: float, n: int = 6, seed: int = 0) -> torch.Tensor:
    img, txt = demo_embeddings(n, 8, noise, seed)
    return similarity(img, txt)


# --------------------------------------------------------------------------- gradient figure


@pytest.mark.parametrize("margin, noise", list(itertools.product([0.0, 0.2, 0.5, 1.0, 2.5], [0.3, 1.5, 3.0])))
def test_gradient_figure_grid(margin, noise):
    S = batch(noise)
    fig = T.gradient_figure(S, margin)
    heats = [tr for tr in fig.data if tr.type == "heatmap"]
    assert len(heats) == 2 and len(fig.data) == 14  # 2 x (heatmap + 3 marks, each over a halo), fixed
    refs = (loop_grad_all(S.numpy(), margin), loop_grad_hardest(S.numpy(), margin))
    for heat, ref, title in zip(heats, refs, fig.layout.annotations[:2]):
        z = np.asarray(heat.z, dtype=float)
        assert z.shape == S.shape and np.isfinite(z).all()
        np.testing.assert_allclose(z, ref, atol=1e-12)
        assert f"{int((ref != 0).sum())} entries of S get gradient" in title.text
        assert heat.coloraxis == "coloraxis"
    ca = fig.layout.coloraxis
    assert (ca.cmin, ca.cmax, ca.cmid) == (*T.GRADIENT_ZRANGE, 0.0)
    assert f"L = {losses.triplet_hardest(S, margin).item():.3f}" in fig.layout.annotations[1].text
    marks = outlines(fig.data)
    n = S.shape[0]
    assert [len(tr.x) for tr in marks] == [n, n, n] * 2
    assert sum(bool(tr.showlegend) for tr in marks) == 3  # one legend entry per kind of mark


def test_gradient_figure_changes_with_margin_and_batch():
    S = batch(1.5)
    z = {m: np.asarray(T.gradient_figure(S, m).data[0].z) for m in (0.0, 0.5)}
    assert not np.array_equal(z[0.0], z[0.5])
    assert not np.array_equal(np.asarray(T.gradient_figure(batch(3.0), 0.5).data[0].z), z[0.5])
    # support grows with the margin (the hinges' sets of active triplets are nested)
    counts = [int((np.asarray(T.gradient_figure(S, m).data[7].z) != 0).sum()) for m in (0.0, 0.2, 0.6, 1.5)]
    assert counts == sorted(counts)


def test_gradient_figure_rejects_bad_input():
    with pytest.raises(ValueError, match="margin"):
        T.gradient_figure(batch(1.0), -0.1)
    with pytest.raises(ValueError, match="S must be square"):
        T.gradient_figure(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="S must be at least 2x2"):
        T.gradient_figure(torch.zeros(1, 1))


# --------------------------------------------------------------------------- the sphere picture

TANGENT_GRID = list(itertools.product([0.0, 0.3, 1.2, math.pi], [0.0, 0.5, 2.0], ["same", "opposite"], [0.0, 0.2, 0.8]))


@pytest.mark.parametrize("tp, tn, side, margin", TANGENT_GRID)
def test_tangent_figure_grid(tp, tn, side, margin):
    fig = T.tangent_figure(tp, tn, side, margin, n_grid=21)
    assert len(fig.data) == 13  # circle, 3 x (ray + arrow), 2 x (heatmap + edge + cross): fixed for the widgets
    heats = [tr for tr in fig.data if tr.type == "heatmap"]
    assert len(heats) == 2
    deg = np.linspace(0, 180, 21)
    ref = analysis.triplet_hn_tangent_norm(
        torch.tensor(np.radians(deg))[None, :], torch.tensor(np.radians(deg))[:, None], T.SIDES[side], margin=margin
    )
    for heat, key in zip(heats, ("anchor", "negative")):
        z = np.asarray(heat.z, dtype=float)
        assert z.shape == (21, 21) and np.isfinite(z).all() and z.min() >= 0 and z.max() <= 2 + 1e-12
        np.testing.assert_allclose(z, ref[key].numpy(), atol=1e-12)  # rows: theta-, columns: theta+
    crosses = [tr for tr in fig.data if tr.type == "scatter" and tr.mode == "markers"]
    assert len(crosses) == 2
    for c in crosses:
        assert math.isclose(c.x[0], math.degrees(tp)) and math.isclose(c.y[0], math.degrees(tn))
    here = analysis.triplet_hn_tangent_norm(tp, tn, T.SIDES[side], margin=margin)
    assert f"{float(here.anchor):.3f}" in fig.layout.annotations[1].text
    assert f"{float(here.negative):.3f}" in fig.layout.annotations[2].text
    assert fig.layout.xaxis2.range == (0, 180) and fig.layout.yaxis3.range == (0, 180)
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0.0, 2.0)
    # the drawing: points and descent arrows of analysis.triplet_hn_descent in the x-z plane
    sphere = analysis.triplet_hn_descent(tp, tn, T.SIDES[side], margin)
    for k, (point, step) in enumerate([(sphere.anchor, sphere.anchor_step), (sphere.positive, sphere.positive_step),
                                       (sphere.negative, sphere.negative_step)]):
        ray, arrow = fig.data[1 + 2 * k], fig.data[2 + 2 * k]
        xz = point.numpy()[[0, 2]]
        np.testing.assert_allclose([ray.x[1], ray.y[1]], xz, atol=1e-12)
        np.testing.assert_allclose([arrow.x[1], arrow.y[1]], xz + step.numpy()[[0, 2]], atol=1e-12)


def test_tangent_figure_changes_with_each_control():
    base = T.tangent_figure(0.5, 0.4, "opposite", 0.2, n_grid=11)
    moved = T.tangent_figure(0.5, 0.9, "opposite", 0.2, n_grid=11)
    assert moved.data[-1].y != base.data[-1].y
    side = T.tangent_figure(0.5, 0.4, "same", 0.2, n_grid=11)
    assert not np.array_equal(np.asarray(side.data[7].z), np.asarray(base.data[7].z))
    wider = T.tangent_figure(0.5, 0.4, "opposite", 0.8, n_grid=11)
    assert not np.array_equal(np.asarray(wider.data[7].z), np.asarray(base.data[7].z))


@pytest.mark.parametrize(
    "args, exc, match",
    [((-0.1, 0.2), ValueError, "theta_pos"), ((0.1, 3.5), ValueError, "theta_neg"),
     ((0.1, 0.2, "left"), ValueError, "side"), ((0.1, 0.2, "same", -1.0), ValueError, "margin"),
     ((0.1, 0.2, "same", 0.2, 81), ValueError, "n_grid"), (("a", 0.2), TypeError, "theta_pos")],
)
def test_tangent_figure_rejects_bad_input(args, exc, match):
    with pytest.raises(exc, match=match):
        T.tangent_figure(*args)
