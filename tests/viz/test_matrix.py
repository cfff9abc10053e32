"""vlr_lib.viz.matrix over a grid of inputs."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from vlr_lib.viz._style import POSITIVE
from vlr_lib.viz.matrix import oriented, similarity_heatmap


@pytest.mark.parametrize("n", [2, 5, 32])
@pytest.mark.parametrize("diverging", [False, True])
def test_heatmap_shapes_and_marks(n, diverging):
    S = torch.rand(n, n) * 2 - 1
    eye = torch.eye(n, dtype=torch.bool)
    fig = similarity_heatmap(S, marks={"positive": eye}, diverging=diverging)
    heat, halo, marks = fig.data
    assert (halo.marker.color, halo.showlegend, list(halo.x)) == ("white", False, list(marks.x))  # under the outline
    assert np.asarray(heat.z).shape == (n, n)
    assert np.isfinite(np.asarray(heat.z, dtype=float)).all()
    assert list(marks.x) == list(range(n)) and list(marks.y) == list(range(n))
    assert (heat.zmid == 0.0) == diverging
    # Outline symbols take their colour from marker.color: the convention's positive look.
    assert (marks.marker.symbol, marks.marker.color) == ("square-open", POSITIVE)
    assert fig.layout.xaxis.constrain == "domain" and fig.layout.yaxis.constrain == "domain"


def test_heatmap_rejects_bad_input():
    with pytest.raises(ValueError, match="S must be 2-D"):
        similarity_heatmap(torch.rand(3))
    with pytest.raises(ValueError, match="marks"):
        similarity_heatmap(torch.rand(3, 3), marks={"p": torch.eye(2, dtype=torch.bool)})
    with pytest.raises(ValueError, match="zrange"):
        similarity_heatmap(torch.rand(3, 3), zrange=(1.0, -1.0))


def test_oriented_puts_the_queries_of_a_direction_in_rows():
    S, mask = torch.arange(6.0).reshape(2, 3), torch.tensor([[True, False, False], [False, True, True]])
    assert oriented(S, mask, "i2t")[0] is S
    S_q, mask_q = oriented(S, mask, "t2i")
    assert torch.equal(S_q, S.T) and torch.equal(mask_q, mask.T)
    with pytest.raises(ValueError, match="^direction"):
        oriented(S, mask, "both")
