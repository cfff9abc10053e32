"""vlr_lib.viz.contrastive over grids of temperatures, queries and directions."""
from __future__ import annotations

import math


import numpy as np
import pytest
import torch

from tests.viz.helpers import outlines, title
from vlr_lib.demo import demo_embeddings
from vlr_lib.similarity import similarity
from vlr_lib.viz import contrastive as C

TAUS = [0.003, 0.05, 0.1, 0.5, 3.0]


@pytest.fixture(scope="module")
def S() -> torch.Tensor:
    img, txt = demo_embeddings(n=8, dim=16, noise=0.8, seed=0)
    return similarity(img, txt)


def five_caption_batch(n_img: int = 3, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    S = torch.rand(n_img, 5 * n_img, generator=g, dtype=torch.float64) * 2 - 1
    return S, torch.arange(n_img)[:, None] == (torch.arange(5 * n_img) // 5)[None, :]


@pytest.mark.parametrize("tau", TAUS)
@pytest.mark.parametrize("query", [0, 3, 7])
@pytest.mark.parametrize("direction", ["i2t", "t2i"])
def test_negative_weight_bars_grid(S, tau, query, direction):
    fig = C.negative_weight_bars(S, tau, query, direction=direction)
    bars, hardest, uniform = fig.data
    y = np.asarray(bars.y, dtype=float)
    assert y.shape == (7,) and np.isfinite(y).all()
    assert (np.diff(y) <= 1e-15).all(), "bars are sorted heaviest first"
    assert y.sum() == pytest.approx(1.0) or y.sum() == 0.0
    assert tuple(fig.layout.yaxis.range) == (0.0, 1.05)
    assert list(uniform.y) == pytest.approx([1 / 7, 1 / 7])
    # the hover data names the candidates; the first bar is the query's hardest negative
    idx = np.asarray(bars.customdata)[:, 0].astype(int)
    S_q = S if direction == "i2t" else S.T
    negs = [j for j in range(8) if j != query]
    assert sorted(idx) == negs
    assert idx[0] == max(negs, key=lambda j: float(S_q[query, j]))
    assert "effective number of negatives" in title(fig)


def test_negative_weight_bars_change_with_tau_and_concentrate(S):
    low = np.asarray(C.negative_weight_bars(S, 1e-3, 2).data[0].y)
    mid = np.asarray(C.negative_weight_bars(S, 0.1, 2).data[0].y)
    high = np.asarray(C.negative_weight_bars(S, 100.0, 2).data[0].y)
    assert not np.allclose(low, mid)
    assert low[0] > 0.999  # tau -> 0: all weight on the hardest negative (Triplet-SH)
    np.testing.assert_allclose(high, 1 / 7, atol=0.01)  # tau -> inf: uniform


@pytest.mark.parametrize("direction", ["i2t", "t2i"])
def test_temperature_sweep_monotone(S, direction):
    taus = np.logspace(-3, 1, 9)
    fig = C.temperature_sweep(S, list(taus), query=1, direction=direction)
    n_q, n_mean, top = (np.asarray(t.y, dtype=float) for t in fig.data)
    assert list(fig.data[0].x) == pytest.approx(list(taus))
    for curve in (n_q, n_mean):
        assert np.isfinite(curve).all() and (curve >= 1 - 1e-9).all() and (curve <= 7 + 1e-9).all()
    # entropy of a softmax grows with its temperature
    assert (np.diff(n_q) >= -1e-9).all() and (np.diff(top) <= 1e-9).all()
    assert fig.layout.xaxis.type == "log"


def test_gradient_heatmap_matches_hand_gradient(S):
    tau = 0.1
    fig = C.gradient_heatmap(S, tau)
    z = np.asarray(fig.data[0].z, dtype=float)
    P_row = torch.softmax(S / tau, dim=1)
    P_col = torch.softmax(S / tau, dim=0)
    eye = torch.eye(8, dtype=S.dtype)
    np.testing.assert_allclose(z, ((P_row - eye) + (P_col - eye)).numpy() / tau, atol=1e-10)
    assert fig.data[0].zmid == 0 and fig.data[0].zmin == -fig.data[0].zmax
    positives, hn = outlines(fig.data[1:])
    assert positives.name == "positive"
    assert list(hn.y) == list(range(8))
    assert all(int(j) == int(S[i].masked_fill(eye.bool()[i], -9).argmax()) for i, j in zip(hn.y, hn.x))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda S: C.negative_weight_bars(S, 0.0), "temperature"),
        (lambda S: C.negative_weight_bars(S, 0.1, direction="both"), "direction"),
        (lambda S: C.negative_weight_bars(S, 0.1, query=8), "query"),
        (lambda S: C.negative_weight_bars(S[:, :3], 0.1), "S"),
        (lambda S: C.temperature_sweep(S, [0.1]), "temperatures"),
        (lambda S: C.temperature_sweep(S, [0.1, -1.0]), "temperatures"),
        (lambda S: C.gradient_heatmap(S, -1.0), "temperature"),
    ],
)
def test_bad_input(S, call, match):
    with pytest.raises(ValueError, match=match):
        call(S)


def test_negative_weight_bars_say_when_weights_underflow():
    S = torch.tensor([[1.0, -1.0], [-1.0, 1.0]], dtype=torch.float64)  # gap 2: e^{-2/0.001} underflows
    fig = C.negative_weight_bars(S, 1e-3, 0)
    assert list(fig.data[0].y) == [0.0] and "underflows" in title(fig)
    assert "underflows" not in title(C.negative_weight_bars(S, 0.1, 0))


@pytest.mark.parametrize("logit_scale", [0.0, math.log(10.0), math.log(100.0)])
@pytest.mark.parametrize("logit_bias", [-15.0, -10.0, 0.0, 5.0])
@pytest.mark.parametrize("tau", [0.01, 0.1, 1.0])
def test_sigmoid_weights_figure_grid(logit_scale, logit_bias, tau):
    """SigLIP's weight of a negative is sigma(t s + b), the same curve whatever the other negatives do; NT-Xent's
    shrinks when they get harder (one softmax normaliser per query)."""
    fig = C.sigmoid_weights_figure(logit_scale, logit_bias, tau, points=21)
    sig_easy, soft_easy, sig_hard, soft_hard = fig.data
    x = np.asarray(sig_easy.x, dtype=float)
    expected = 1.0 / (1.0 + np.exp(-(math.exp(logit_scale) * x + logit_bias)))
    np.testing.assert_allclose(np.asarray(sig_easy.y, dtype=float), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(sig_hard.y), np.asarray(sig_easy.y))
    easy, hard = np.asarray(soft_easy.y, dtype=float), np.asarray(soft_hard.y, dtype=float)
    assert np.isfinite(easy).all() and np.isfinite(hard).all()
    assert (hard <= easy + 1e-15).all() and (hard < easy).any()
    assert all(0.0 <= v <= 1.0 for t in fig.data for v in t.y)
    assert f"b = " in title(fig) and "τ = " in title(fig)


def test_sigmoid_weights_figure_bad_input():
    with pytest.raises(ValueError, match="temperature"):
        C.sigmoid_weights_figure(1.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="logit_scale"):
        C.sigmoid_weights_figure(6.0, 0.0, 0.1)
    with pytest.raises(ValueError, match="logit_bias"):
        C.sigmoid_weights_figure(1.0, float("nan"), 0.1)