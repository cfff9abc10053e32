"""vlr_lib.widgets.cocos: moving a control redraws the COCOS figure in place."""
from __future__ import annotations

import ipywidgets as W
import numpy as np

from tests.viz.helpers import title
from vlr_lib.analysis import CocosSettings
from vlr_lib.demo import demo_embeddings
from vlr_lib.similarity import similarity
from vlr_lib.viz import cocos as viz
from vlr_lib.widgets.cocos import cocos_explorer
from tests.widgets.helpers import find, live


def dots(fig, panel: int) -> list[tuple[float, float]]:
    tr = fig.data[3 * panel + 2]
    return list(zip(tr.x, tr.y))


def test_eps_and_margin_sliders_redraw_the_right_panels():
    box = cocos_explorer(n=10, noise=1.5)
    assert "vlr-explorer-cocos" in box._dom_classes
    fig, eps = live(box), find(box, W.FloatLogSlider, "ε")
    assert box.controls["eps"] is eps
    triplet_before, nt_before = dots(fig, 0), dots(fig, 2)
    eps.value = 0.1
    S = similarity(*demo_embeddings(10, 16, 1.5, 0))
    expected = viz.cocos_figure(S, CocosSettings(eps=eps.value))
    assert dots(fig, 2) == dots(expected, 2) != nt_before
    assert dots(fig, 0) == triplet_before  # epsilon does not touch the triplets
    box.controls["margin"].value = 0.6
    expected = viz.cocos_figure(S, CocosSettings(eps=eps.value, margin=0.6))
    assert dots(fig, 0) == dots(expected, 0) and len(dots(fig, 0)) > len(triplet_before)
    assert fig.layout.annotations[0].text == expected.layout.annotations[0].text


def test_direction_noise_and_temperatures():
    box = cocos_explorer(n=10, noise=1.5)
    fig = live(box)
    z_before = np.asarray(fig.data[0].z, dtype=float)
    box.controls["direction"].value = "t2i"
    np.testing.assert_allclose(np.asarray(fig.data[0].z, dtype=float), z_before.T)
    assert "(t2i)" in title(fig)
    box.controls["noise"].value = 0.2  # an easy batch: hardly anything violates
    S = similarity(*demo_embeddings(10, 16, 0.2, 0))
    expected = viz.cocos_figure(S, CocosSettings(), "t2i")
    np.testing.assert_allclose(np.asarray(fig.data[0].z, dtype=float), np.asarray(expected.data[0].z, dtype=float))
    assert dots(fig, 0) == dots(expected, 0)
    box.controls["temperature"].value = 0.01
    box.controls["tau"].value = 0.1
    expected = viz.cocos_figure(S, CocosSettings(temperature=0.01, tau=0.1), "t2i")
    assert dots(fig, 2) == dots(expected, 2) and dots(fig, 3) == dots(expected, 3)


def test_a_given_batch_has_no_noise_control():
    S = similarity(*demo_embeddings(6, 16, 1.0, 3))
    box = cocos_explorer(S)
    assert "noise" not in box.controls
    np.testing.assert_allclose(np.asarray(box.figure.data[0].z, dtype=float), S.numpy())
