"""vlr_lib.widgets.triplet: controls are wired to the builders (no browser needed)."""
from __future__ import annotations

import math

import numpy as np

from tests.viz.helpers import title
from tests.widgets.helpers import live
from vlr_lib import analysis
from vlr_lib.widgets import triplet as W


def test_gradient_explorer_follows_margin_and_noise():
    box = W.gradient_explorer(n=5, dim=8, noise=1.5, margin=0.2)
    fig = live(box)
    z0 = np.asarray(fig.data[0].z)
    title0 = title(fig)
    box.controls["margin"].value = 1.0
    assert "m = 1.00" in title(fig) and title(fig) != title0
    z1 = np.asarray(fig.data[0].z)
    assert (z1 != 0).sum() >= (z0 != 0).sum() and not np.array_equal(z0, z1)
    box.controls["noise"].value = 0.0
    assert not np.array_equal(np.asarray(fig.data[0].z), z1)
    assert len(fig.data) == 2 * (1 + 2 * 3)  # per panel: the heatmap, a halo and an outline per mark


def test_tangent_explorer_follows_every_control():
    box = W.tangent_explorer(theta_pos_deg=30.0, theta_neg_deg=20.0, side="opposite", margin=0.2)
    fig, c = live(box), box.controls
    cross = fig.data[-1]
    assert math.isclose(cross.x[0], 30.0) and math.isclose(cross.y[0], 20.0)
    c["theta_neg"].value = 50.0
    assert math.isclose(fig.data[-1].y[0], 50.0)
    expected = analysis.triplet_hn_tangent_norm(math.radians(30), math.radians(50), math.pi, margin=0.2)
    assert f"{float(expected.anchor):.3f}" in fig.layout.annotations[1].text
    c["side"].value = "same"
    assert "same side" in title(fig)
    c["margin"].value = 0.0
    assert "m = 0.00" in title(fig)
    c["theta_pos"].value = 10.0  # theta- > theta+ with m = 0: the hinge is inactive, every norm 0
    assert "= 0.000" in fig.layout.annotations[1].text and math.isclose(fig.data[-1].x[0], 10.0)
