"""vlr_lib.widgets.unified: the margin and scale sliders redraw the figures in place."""
from __future__ import annotations

import ipywidgets as W
import numpy as np
import pytest

from tests.viz.helpers import title
from tests.widgets.helpers import find, live
from vlr_lib.demo import demo_embeddings
from vlr_lib.similarity import similarity
from vlr_lib.viz import unified as viz
from vlr_lib.widgets.unified import surface_explorer, unified_explorer


@pytest.fixture(scope="module")
def S():
    img, txt = demo_embeddings(n=8, dim=16, noise=0.8, seed=0)
    return similarity(img, txt)


def test_unified_explorer_is_what_the_browser_test_expects(S):
    box = unified_explorer(S)
    assert "vlr-explorer-unified" in box._dom_classes
    m = find(box, W.FloatSlider, "margin m")
    assert type(m) is W.FloatSlider and m.value == 0.2 and m.min == 0.0 and m.max >= 0.4
    assert box.controls["margin"] is m
    assert isinstance(box.children[-2], W.Output)  # controls above, figure below, then the hint


@pytest.mark.parametrize("margin", [0.0, 0.35, 0.5])
def test_margin_slider_redraws_curves_and_heatmap(S, margin):
    box = unified_explorer(S, margin=0.2, gamma=60.0)
    fig, m = live(box), find(box, W.FloatSlider, "margin m")
    curve, heat = np.array(fig.data[0].y), np.array(fig.data[4].z, dtype=float)
    m.value = margin
    expected = viz.explorer_figure(S, margin, 60.0)
    np.testing.assert_allclose(np.asarray(fig.data[0].y), np.asarray(expected.data[0].y))
    np.testing.assert_allclose(np.asarray(fig.data[4].z, dtype=float), np.asarray(expected.data[4].z, dtype=float))
    assert not np.allclose(np.asarray(fig.data[0].y), curve)
    assert not np.allclose(np.asarray(fig.data[4].z, dtype=float), heat)
    assert f"margin m = {margin:.2f}" in title(fig)


def test_gamma_slider_redraws(S):
    box = unified_explorer(S)
    fig, g = live(box), find(box, W.FloatLogSlider, "scale γ")
    before = np.array(fig.data[3].y)
    g.value = 5.0
    np.testing.assert_allclose(np.asarray(fig.data[3].y), np.asarray(viz.explorer_figure(S, 0.2, g.value).data[3].y))
    assert not np.allclose(np.asarray(fig.data[3].y), before)


def test_surface_explorer_margin_slider():
    box = surface_explorer(margin=0.2, n=12)
    fig, m = live(box), find(box, W.FloatSlider, "surface m")
    before = np.array(fig.data[1].z)
    m.value = 0.0
    np.testing.assert_allclose(np.asarray(fig.data[1].z), np.asarray(viz.surfaces_figure(0.0, n=12).data[1].z))
    assert not np.allclose(np.asarray(fig.data[1].z), before)
    assert "m = 0.00" in title(fig)
