"""vlr_lib.widgets.evaluation: controls are wired to the builders (no browser needed)."""
from __future__ import annotations

from tests.widgets.helpers import live

import numpy as np

from vlr_lib.widgets import evaluation as W


def test_shapes_browser_follows_group_and_difficulty():
    box = W.shapes_browser(n_groups=2, group_size=3, seed=1, difficulty=0.0)
    fig = live(box)
    assert [t.type for t in fig.data] == ["image"] * 3
    first = [t.source for t in fig.data]
    titles = [a.text for a in fig.layout.annotations if a.text.startswith("img_id")]
    assert titles[0].endswith("(base)") and len(titles) == 3
    box.controls["group"].value = 1
    second = [t.source for t in fig.data]
    assert second != first
    assert [a.text for a in fig.layout.annotations if a.text.startswith("img_id")][0].startswith("img_id 3")
    box.controls["difficulty"].value = 1.0
    assert [t.source for t in fig.data] != second


def bars(fig) -> list[tuple[float, float]]:
    """The ranking's bars, positives and negatives together, by position."""
    return sorted((x, y) for t in fig.data if t.type == "bar" for x, y in zip(t.x, t.y))


def test_retrieval_explorer_wiring():
    box = W.retrieval_explorer(n_images=4, captions_per_image=3, dim=8, noise=1.0)
    c, fig = box.controls, live(box)
    z0 = np.asarray(fig.data[0].z)
    c["noise"].value = 3.0
    assert not np.allclose(np.asarray(fig.data[0].z), z0)
    assert len(bars(fig)) == 12  # an image query ranks 12 captions
    before = bars(fig)
    c["query"].value = 2
    assert bars(fig) != before and fig.layout.annotations[1].text.startswith("image 2")
    c["direction"].value = "t2i"
    assert c["query"].max == 11 and c["k"].max == 4
    assert len(bars(fig)) == 4 and fig.layout.annotations[1].text.startswith("caption 2")
    c["query"].value = 11
    assert fig.layout.annotations[1].text.startswith("caption 11 (of image 3)")
    c["direction"].value = "i2t"  # back: the query slider is clamped to the images
    assert c["query"].max == 3 and c["query"].value == 3
    assert fig.layout.annotations[1].text.startswith("image 3")
    c["k"].value = 1
    band = [s for s in fig.layout.shapes if s.xref == "x2"][0]
    assert (band.x0, band.x1) == (0.5, 1.5)
