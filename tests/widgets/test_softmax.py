"""vlr_lib.widgets.softmax: moving a control redraws the figure in place."""
from __future__ import annotations

import ipywidgets as W
import numpy as np
import pytest
import torch

from tests.viz.helpers import title
from vlr_lib.demo import demo_embeddings
from vlr_lib.similarity import similarity
from vlr_lib.viz import softmax as viz
from vlr_lib.widgets.softmax import partition_explorer, threshold_explorer
from tests.widgets.helpers import find, live


@pytest.fixture(scope="module")
def S():
    img, txt = demo_embeddings(n=8, dim=16, noise=1.2, seed=0)
    return similarity(img, txt)


def markers(fig, panel: int) -> list[tuple[float, float]]:
    tr = fig.data[5 * panel + 2]  # grey S, weights, dots, the positive's halo and outline
    return list(zip(tr.x, tr.y))


def test_k_slider_redraws_the_snm_panel(S):
    box = partition_explorer(S, query=2, k=3)
    assert "vlr-explorer-softmax" in box._dom_classes
    fig, k = live(box), find(box, W.IntSlider, "SNM: top k per query")
    assert box.controls["k"] is k and k.max == 7
    before = markers(fig, 1)
    k.value = 6
    expected = viz.partition_figure(S, 2, 6, 0.5, 20.0)
    assert markers(fig, 1) == markers(expected, 1) != before
    assert len(markers(fig, 1)) == 6
    assert title(fig) == title(expected)


def test_query_fraction_and_scale_sliders(S):
    box = partition_explorer(S)
    fig = live(box)
    box.controls["query"].value = 5
    assert list(fig.data[3].x) == [5]
    box.controls["fraction"].value = 0.2
    assert len(markers(fig, 3)) == int(np.ceil(0.2 * 8 * 7))
    before = np.array(fig.data[1].z, dtype=object)
    box.controls["scale"].value = 5.0
    expected = viz.partition_figure(S, 5, 3, 0.2, 5.0)
    np.testing.assert_array_equal(np.array(fig.data[1].z, dtype=object), np.array(expected.data[1].z, dtype=object))
    assert not np.array_equal(before, np.array(fig.data[1].z, dtype=object))


def test_threshold_slider_moves_the_line_and_readout():
    g = torch.Generator().manual_seed(0)
    c2i = torch.arange(5).repeat_interleave(5)
    results = {
        name: ((torch.rand(5, 25, generator=g, dtype=torch.float64) - 0.5) + 0.6 * (torch.arange(5)[:, None] == c2i), c2i)
        for name in ("a", "b")
    }
    box = threshold_explorer(results, threshold=0.2, n_queries=6)
    fig, t = live(box), find(box, W.FloatSlider, "global threshold")
    assert fig.layout.shapes[0].y0 == pytest.approx(0.2)
    title_before = fig.layout.annotations[0].text
    t.value = 0.5
    expected = viz.query_scores_figure(results, 0.5, 6)
    assert fig.layout.shapes[0].y0 == pytest.approx(0.5)
    assert fig.layout.annotations[0].text == expected.layout.annotations[0].text != title_before
    box.controls["n_queries"].value = 3
    assert len(set(fig.data[0].x)) == 3
