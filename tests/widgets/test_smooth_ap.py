"""vlr_lib.widgets.smooth_ap: the tau and query sliders redraw the figure in place."""
from __future__ import annotations

import ipywidgets as W
import numpy as np
import pytest
import torch

from tests.viz.helpers import title
from tests.widgets.helpers import find, live
from vlr_lib import metrics
from vlr_lib.viz import smooth_ap as viz
from vlr_lib.widgets.smooth_ap import smooth_ap_explorer


def batch():
    g = torch.Generator().manual_seed(0)
    S = torch.rand(3, 15, generator=g, dtype=torch.float64) * 2 - 1
    return S, torch.arange(3)[:, None] == (torch.arange(15) // 5)[None, :]


def test_tau_slider_redraws():
    S, mask = batch()
    box = smooth_ap_explorer(S, mask, tau=0.01)
    assert "vlr-explorer-smooth-ap" in box._dom_classes
    fig, tau = live(box), find(box, W.FloatLogSlider, "temperature τ")
    before = np.array(fig.data[1].y)
    tau.value = 0.2
    expected = viz.smooth_ap_figure(S[0], mask[0], tau.value)
    np.testing.assert_allclose(np.asarray(fig.data[1].y), np.asarray(expected.data[1].y))
    assert not np.allclose(np.asarray(fig.data[1].y), before)
    assert title(fig) == title(expected)


@pytest.mark.parametrize("query", [1, 2])
def test_query_slider_redraws(query):
    S, mask = batch()
    box = smooth_ap_explorer(S, mask)
    fig, q = live(box), find(box, W.IntSlider, "query")
    assert q.max == 2
    q.value = query
    assert fig.data[5].y[0] == pytest.approx(metrics.average_precision(S[query], mask[query]))


def test_diagonal_batch_without_mask():
    S = torch.eye(4, dtype=torch.float64) * 0.5
    box = smooth_ap_explorer(S)
    assert live(box).data[5].y[0] == pytest.approx(1.0)
