"""vlr_lib.viz.smooth_ap over grids of temperatures and queries."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.core import references as ref
from vlr_lib import metrics
from vlr_lib.viz import smooth_ap as A

SCORES = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2])
IS_POS = np.array([1, 0, 1, 0, 0, 1, 0, 0], dtype=bool)  # positives at ranks 1, 3 and 6


def five_caption_batch(n_img: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    S = torch.rand(n_img, 5 * n_img, generator=g, dtype=torch.float64) * 2 - 1
    return S, torch.arange(5 * n_img) // 5


def test_sigmoid_is_bleeker_eq7():
    x = np.linspace(-0.3, 0.3, 61)
    for tau in (0.01, 0.1, 1.0):
        np.testing.assert_allclose(A.sigmoid(x, tau), 1 / (1 + np.exp(-x / tau)), rtol=1e-12)
    np.testing.assert_allclose(A.sigmoid(np.array([-1.0, 1.0]), 1e-6), [0.0, 1.0])  # no overflow
    with pytest.raises(ValueError, match="tau"):
        A.sigmoid(x, 0.0)


def test_exact_ap_hand_worked():
    # precision at the positives' ranks: 1/1, 2/3, 3/6
    assert A.exact_ap(SCORES, IS_POS) == pytest.approx((1 + 2 / 3 + 3 / 6) / 3)
    assert A.exact_ap(SCORES, np.arange(8) < 3) == 1.0
    for r in range(8):  # one positive at rank r + 1: AP = 1 / (r + 1)
        assert A.exact_ap(SCORES, np.arange(8) == r) == pytest.approx(1 / (r + 1))


def test_exact_ap_matches_metrics_map_at_full_depth():
    S, c2i = five_caption_batch()
    ours = np.mean([A.exact_ap(S[i], c2i == i) for i in range(4)])
    assert ours == pytest.approx(metrics.map_at_k(S, c2i, k=20))


@pytest.mark.parametrize("tau", [0.003, 0.03, 0.3])
def test_smoothed_ap_matches_slow_reference(tau):
    S, c2i = five_caption_batch()
    mask = (c2i[None, :] == torch.arange(4)[:, None])
    for q in range(4):
        expected = 1 - float(ref.smooth_ap(S[q:q + 1], tau, ref.as_lists(mask[q:q + 1], 1, 20)))
        assert A.smoothed_ap(S[q], mask[q], tau) == pytest.approx(expected, rel=1e-10)


def test_small_tau_recovers_exact_ap():
    assert A.smoothed_ap(SCORES, IS_POS, 1e-4) == pytest.approx(A.exact_ap(SCORES, IS_POS), abs=1e-12)
    assert abs(A.smoothed_ap(SCORES, IS_POS, 0.5) - A.exact_ap(SCORES, IS_POS)) > 0.05


@pytest.mark.parametrize("tau", [1e-4, 0.01, 0.1, 1.0])
@pytest.mark.parametrize("query", [0, 2])
def test_smooth_ap_figure_grid(tau, query):
    S, c2i = five_caption_batch()
    scores, is_pos = S[query], c2i == query
    fig = A.smooth_ap_figure(scores, is_pos, tau)
    assert len(fig.data) == 7
    step, G, pos_pairs, neg_pairs, curve, exact, now = fig.data
    for trace in fig.data:
        assert np.isfinite(np.asarray(trace.y, dtype=float)).all()
    assert len(pos_pairs.x) == 5 * 4 and len(neg_pairs.x) == 5 * 15  # (positive, other candidate) pairs
    assert np.asarray(G.y).min() >= 0 and np.asarray(G.y).max() <= 1
    assert list(now.x) == [pytest.approx(tau)]
    assert now.y[0] == pytest.approx(A.smoothed_ap(scores, is_pos, tau))
    assert list(exact.y) == pytest.approx([A.exact_ap(scores, is_pos)] * 2)
    assert fig.layout.xaxis2.type == "log" and tuple(fig.layout.yaxis.range) == (-0.03, 1.03)
    # the tau curve ends at the exact AP on its sharp side
    assert curve.y[0] == pytest.approx(A.exact_ap(scores, is_pos), abs=1e-3)


def test_smooth_ap_figure_changes_with_tau_and_one_positive_works():
    a, b = A.smooth_ap_figure(SCORES, IS_POS, 0.01), A.smooth_ap_figure(SCORES, IS_POS, 0.2)
    assert not np.allclose(np.asarray(a.data[1].y), np.asarray(b.data[1].y))
    assert a.layout.title.text != b.layout.title.text
    one = A.smooth_ap_figure(SCORES, np.arange(8) == 2, 0.01)  # a t2i-like query: one positive
    assert len(one.data[2].x) == 0 and len(one.data[3].x) == 7
    assert one.data[5].y[0] == pytest.approx(1 / 3)


def test_ranking_figure():
    fig = A.ranking_figure(SCORES[::-1], IS_POS[::-1])
    bars, text = fig.data
    assert list(bars.y) == sorted(SCORES, reverse=True)
    assert list(text.text) == ["1/1", "2/3", "3/6"]
    assert "AP = 0.7222" in fig.layout.title.text


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: A.exact_ap(SCORES, np.zeros(8, dtype=bool)), "is_pos"),
        (lambda: A.exact_ap(SCORES, IS_POS[:4]), "scores"),
        (lambda: A.exact_ap(np.array([0.1, math.nan]), np.array([True, False])), "scores"),
        (lambda: A.smoothed_ap(SCORES, IS_POS, -1.0), "tau"),
        (lambda: A.smooth_ap_figure(SCORES, IS_POS, 0.0), "tau"),
        (lambda: A.smooth_ap_figure(SCORES, IS_POS, 0.1, taus=[0.1, -1.0]), "taus"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
