"""vlr_lib.widgets.contrastive: moving a control redraws the figure in place."""
from __future__ import annotations

import ipywidgets as W
import numpy as np
import pytest

from tests.viz.helpers import title
from vlr_lib import analysis
from vlr_lib.demo import demo_embeddings
from vlr_lib.similarity import similarity
from vlr_lib.viz import contrastive as viz
from vlr_lib.widgets.contrastive import sigmoid_explorer, temperature_explorer
from tests.widgets.helpers import find, live


@pytest.fixture(scope="module")
def S():
    img, txt = demo_embeddings(n=8, dim=16, noise=0.8, seed=0)
    return similarity(img, txt)


def test_temperature_slider_redraws_bars_and_readout(S):
    box = temperature_explorer(S, temperature=0.1, query=2)
    assert "vlr-explorer-contrastive" in box._dom_classes
    fig, tau = live(box), find(box, W.FloatLogSlider, "temperature τ")
    before, title_before = np.array(fig.data[0].y), title(fig)
    tau.value = 0.01
    expected = viz.negative_weight_bars(S, tau.value, 2)
    np.testing.assert_allclose(np.asarray(fig.data[0].y), np.asarray(expected.data[0].y))
    assert not np.allclose(np.asarray(fig.data[0].y), before)
    assert title(fig) == title(expected) != title_before
    shares = np.asarray(expected.data[0].y)  # the title reads out the new bars
    assert f"{analysis.effective_number(shares):.2f}" in title(fig)
    assert f"hardest share {shares.max():.3f}" in title(fig)
    assert box.controls["temperature"] is tau


def test_query_slider_and_direction(S):
    box = temperature_explorer(S, temperature=0.2, direction="t2i")
    fig, q = live(box), find(box, W.IntSlider, "query")
    assert q.max == 7
    q.value = 5
    expected = viz.negative_weight_bars(S, 0.2, 5, direction="t2i")
    np.testing.assert_array_equal(np.asarray(fig.data[0].customdata), np.asarray(expected.data[0].customdata))
    assert "query 5" in title(fig)


def test_sigmoid_sliders_redraw_the_weights():
    box = sigmoid_explorer()
    assert "vlr-explorer-sigmoid" in box._dom_classes
    fig = live(box)
    before = np.asarray(fig.data[0].y, dtype=float)
    find(box, W.FloatSlider, "bias b").value = -2.0
    expected = viz.sigmoid_weights_figure(box.controls["logit_scale"].value, -2.0, box.controls["temperature"].value)
    np.testing.assert_allclose(np.asarray(fig.data[0].y, dtype=float), np.asarray(expected.data[0].y, dtype=float))
    assert not np.allclose(np.asarray(fig.data[0].y, dtype=float), before)
    find(box, W.FloatLogSlider, "temperature τ").value = 0.5
    assert title(fig) == title(viz.sigmoid_weights_figure(box.controls["logit_scale"].value, -2.0, 0.5))