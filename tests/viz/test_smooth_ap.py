"""vlr_lib.viz.smooth_ap over grids of temperatures and queries."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.viz.helpers import title
from tests.core import references as ref
from vlr_lib import losses, metrics
from vlr_lib.viz import smooth_ap as A

SCORES = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2])
IS_POS = np.array([1, 0, 1, 0, 0, 1, 0, 0], dtype=bool)  # positives at ranks 1, 3 and 6


def five_caption_batch(n_img: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    S = torch.rand(n_img, 5 * n_img, generator=g, dtype=torch.float64) * 2 - 1
    return S, torch.arange(5 * n_img) // 5


@pytest.mark.parametrize("tau", [0.003, 0.03, 0.3])
def test_figure_reads_smooth_ap_off_the_slow_reference(tau):
    """The marker at tau is 1 - SmoothAP of the loop reference; the dashed line the exact AP."""
    S, c2i = five_caption_batch()
    mask = (c2i[None, :] == torch.arange(4)[:, None])
    for q in range(4):
        expected = 1 - float(ref.smooth_ap(S[q:q + 1], tau, ref.as_lists(mask[q:q + 1], 1, 20)))
        fig = A.smooth_ap_figure(S[q], mask[q], tau, taus=[1e-4, 1.0])
        assert fig.data[6].y[0] == pytest.approx(expected, rel=1e-10)
        assert fig.data[5].y[0] == pytest.approx(metrics.average_precision(S[q], mask[q]))


def test_small_tau_recovers_exact_ap():
    curve = A.smooth_ap_figure(SCORES, IS_POS, 0.5, taus=[1e-4, 0.5]).data[4].y
    ap = metrics.average_precision(SCORES, IS_POS)
    assert curve[0] == pytest.approx(ap, abs=1e-12) and abs(curve[1] - ap) > 0.05


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
    assert now.y[0] == pytest.approx(1 - float(losses.smooth_ap(scores[None], tau, pos_mask=is_pos[None])))
    assert list(exact.y) == pytest.approx([metrics.average_precision(scores, is_pos)] * 2)
    assert fig.layout.xaxis2.type == "log" and tuple(fig.layout.yaxis.range) == (-0.03, 1.03)
    # the tau curve ends at the exact AP on its sharp side
    assert curve.y[0] == pytest.approx(metrics.average_precision(scores, is_pos), abs=1e-3)


def test_smooth_ap_figure_changes_with_tau_and_one_positive_works():
    a, b = A.smooth_ap_figure(SCORES, IS_POS, 0.01), A.smooth_ap_figure(SCORES, IS_POS, 0.2)
    assert not np.allclose(np.asarray(a.data[1].y), np.asarray(b.data[1].y))
    assert title(a) != title(b)
    one = A.smooth_ap_figure(SCORES, np.arange(8) == 2, 0.01)  # a t2i-like query: one positive
    assert len(one.data[2].x) == 0 and len(one.data[3].x) == 7
    assert one.data[5].y[0] == pytest.approx(1 / 3)


def test_ranking_figure():
    fig = A.ranking_figure(SCORES[::-1], IS_POS[::-1])
    pos, neg, text = fig.data
    assert (pos.marker.color, neg.marker.color) == (A.POSITIVE, A.NEGATIVE)
    bars = sorted(zip([*pos.x, *neg.x], [*pos.y, *neg.y]))
    assert [y for _, y in bars] == sorted(SCORES, reverse=True) and [x for x, _ in bars] == list(range(1, 9))
    assert list(text.text) == ["1/1", "2/3", "3/6"] and list(pos.x) == [1, 3, 6]
    assert "AP = 0.7222" in title(fig)
    tied = SCORES.copy()
    tied[3] = tied[2]  # a negative tied with the second positive is drawn before it, as the metrics rank it
    pos, neg, text = A.ranking_figure(tied, IS_POS).data
    assert list(text.text) == ["1/1", "2/4", "3/6"] and list(pos.x) == [1, 4, 6] and 3 in list(neg.x)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: A.ranking_figure(SCORES, np.zeros(8, dtype=bool)), "is_pos"),
        (lambda: A.smooth_ap_figure(SCORES, IS_POS[:4], 0.1), "is_pos"),
        (lambda: A.ranking_figure(np.array([0.1, math.nan]), np.array([True, False])), "scores"),
        (lambda: A.smooth_ap_figure(SCORES, IS_POS, 0.0), "tau"),
        (lambda: A.smooth_ap_figure(SCORES, IS_POS, 0.1, taus=[0.1, -1.0]), "taus"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
