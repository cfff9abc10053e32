"""vlr_lib.viz.evaluation over grids of control values, against loop references."""
from __future__ import annotations

import base64
import itertools
import struct

import numpy as np
import pytest
import torch

from tests.viz.helpers import outlines, title
from vlr_lib import demo
from vlr_lib.similarity import similarity
from vlr_lib.viz import evaluation as E
from vlr_lib.viz._style import HARDEST, NEGATIVE, POSITIVE


# --------------------------------------------------------------------------- references


def loop_ranks(S: np.ndarray, c2i: np.ndarray, direction: str) -> list[int]:
    """Rank of the first correct candidate in a sorted list (random data has no ties)."""
    n_img, n_cap = S.shape
    if direction == "i2t":
        return [1 + next(p for p, c in enumerate(sorted(range(n_cap), key=lambda c: -S[i, c])) if c2i[c] == i)
                for i in range(n_img)]
    return [1 + sorted(range(n_img), key=lambda i: -S[i, c]).index(c2i[c]) for c in range(n_cap)]


def png_size(uri: str) -> tuple[int, int]:
    assert uri.startswith("data:image/png;base64,")
    raw = base64.b64decode(uri.split(",", 1)[1])
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", raw[16:24])  # IHDR width, height


def ranking(fig) -> tuple[list[int], np.ndarray]:
    """The ranking panel's bars (positives and negatives are two traces) in ranking order: positions, scores."""
    bars = sorted((int(x), float(y)) for tr in fig.data if tr.type == "bar" for x, y in zip(tr.x, tr.y))
    return [x for x, _ in bars], np.array([y for _, y in bars])


def batch(n_images=6, per=5, noise=1.5, seed=0, dim=8):
    img, txt, c2i = demo.demo_retrieval_batch(n_images, per, dim, noise, seed)
    return similarity(img, txt), c2i


# --------------------------------------------------------------------------- gallery


@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("sizes", [[(64, 64)], [(32, 48), (64, 20)]])
def test_gallery_one_image_per_panel_with_its_captions(k, sizes):
    rng = np.random.default_rng(k)
    hw = [sizes[i % len(sizes)] for i in range(k)]
    images = [rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8) for h, w in hw]
    captions = [[f"caption {i}.{c} of a red circle" for c in range(5)] for i in range(k)]
    fig = E.image_gallery(images, captions)
    assert [tr.type for tr in fig.data] == ["image"] * k
    for tr, (h, w) in zip(fig.data, hw):
        assert png_size(tr.source) == (w, h)
    texts = [a.text for a in fig.layout.annotations if a.text.startswith("1.")]
    assert len(texts) == k and all(f"caption {i}.4" in texts[i].replace("<br>", " ") for i in range(k))
    # a different image gives a different picture
    other = E.image_gallery([255 - images[0]] + images[1:], captions)
    assert other.data[0].source != fig.data[0].source


def test_gallery_png_round_trip_is_lossless():
    import zlib

    img = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    raw = base64.b64decode(E._png(img).split(",", 1)[1])
    idat = raw[raw.index(b"IDAT") + 4:raw.index(b"IEND") - 8]
    rows = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(4, 1 + 5 * 3)
    assert (rows[:, 0] == 0).all() and np.array_equal(rows[:, 1:].reshape(4, 5, 3), img)


def test_gallery_rejects_bad_input():
    img = np.zeros((8, 8, 3), dtype=np.uint8)
    with pytest.raises(ValueError, match="captions"):
        E.image_gallery([img, img], [["a"]])
    with pytest.raises(ValueError, match="images"):
        E.image_gallery([np.zeros((8, 8))], [["a"]])
    with pytest.raises(ValueError, match="titles"):
        E.image_gallery([img], [["a"]], titles=["x", "y"])
    with pytest.raises(ValueError, match="images"):
        E.image_gallery([], [])


# --------------------------------------------------------------------------- similarity figure


@pytest.mark.parametrize("n_images, per", [(2, 1), (5, 3), (10, 5)])
@pytest.mark.parametrize("noise", [0.0, 1.0, 3.0])
def test_similarity_figure_grid(n_images, per, noise):
    S, c2i = batch(n_images, per, noise=noise, seed=1)
    fig = E.similarity_figure(S, c2i if per > 1 else None)
    heat, *marks = fig.data
    positives, hn_row, hn_col = outlines(marks)
    assert len(marks) == 6  # each outline over a white halo
    z = np.asarray(heat.z, dtype=float)
    assert z.shape == (n_images, n_images * per) and np.isfinite(z).all()
    np.testing.assert_allclose(z, S.numpy())
    assert (heat.zmin, heat.zmax) == (-1.0, 1.0)
    assert len(positives.x) == n_images * per and len(hn_row.x) == n_images and len(hn_col.x) == n_images * per
    colours = [tr.marker.color for tr in (positives, hn_row, hn_col)]
    # Open symbols draw their outline in marker.color: the convention's colours, the symbol tells the direction.
    assert colours == [POSITIVE, HARDEST, HARDEST]
    assert [tr.marker.symbol for tr in (positives, hn_row, hn_col)] == ["square-open", "triangle-right-open",
                                                                      "triangle-down-open"]
    assert list(positives.y) == c2i.tolist() and list(positives.x) == list(range(n_images * per))


def test_similarity_figure_changes_with_the_batch_and_rejects_bad_input():
    S1, c2i = batch(noise=0.5)
    S2, _ = batch(noise=2.5)
    z1, z2 = (np.asarray(E.similarity_figure(S, c2i).data[0].z) for S in (S1, S2))
    assert not np.allclose(z1, z2)
    with pytest.raises(ValueError, match="caption_to_image"):
        E.similarity_figure(S1)
    with pytest.raises(ValueError, match="S"):
        E.similarity_figure(torch.zeros(3))
    with pytest.raises(ValueError, match="caption_to_image"):
        E.similarity_figure(S1, c2i[:-1])


# --------------------------------------------------------------------------- retrieval figure


GRID = list(itertools.product([0.0, 1.5, 3.0], ["i2t", "t2i"], ["first", "last"], [1, 5]))


@pytest.mark.parametrize("noise, direction, which, k", GRID)
def test_retrieval_figure_grid(noise, direction, which, k):
    n_images, per = 6, 5
    S, c2i = batch(n_images, per, noise=noise, seed=2)
    n_queries = n_images if direction == "i2t" else n_images * per
    query = 0 if which == "first" else n_queries - 1
    fig = E.retrieval_figure(S, c2i, query, direction, k)
    heat, *marks, pos_bars, neg_bars = fig.data
    positives, hardest = outlines(marks)
    assert np.asarray(heat.z).shape == (n_images, n_images * per)
    assert len(hardest.x) == n_queries  # one hardest negative per query of this direction
    n_cand = n_images * per if direction == "i2t" else n_images
    x, y = ranking(fig)
    assert sorted(x) == list(range(1, n_cand + 1))
    assert np.isfinite(y).all() and (np.diff(y) <= 0).all()
    row = S.numpy()[query] if direction == "i2t" else S.numpy()[:, query]
    np.testing.assert_allclose(np.sort(y), np.sort(row))
    assert (pos_bars.marker.color, neg_bars.marker.color) == (POSITIVE, NEGATIVE)
    assert len(pos_bars.x) == (per if direction == "i2t" else 1)
    rank = loop_ranks(S.numpy(), c2i.numpy(), direction)[query]
    assert min(pos_bars.x) == rank
    title = fig.layout.annotations[1].text
    assert f"rank {rank}," in title and (("hit" in title) == (rank <= k))
    assert tuple(fig.layout.yaxis2.range) == (-1.0, 1.0)
    assert tuple(fig.layout.xaxis2.range) == (0.5, n_cand + 0.5)
    band = [s for s in fig.layout.shapes if s.xref == "x2"][0]
    assert (band.x0, band.x1) == (0.5, k + 0.5)
    box = [s for s in fig.layout.shapes if s.xref == "x"][0]
    assert (box.y0, box.y1) == ((query - 0.5, query + 0.5) if direction == "i2t" else (-0.5, n_images - 0.5))


def test_retrieval_figure_title_reports_the_library_metrics_and_controls_change_it():
    S, c2i = batch(noise=1.5)
    fig = E.retrieval_figure(S, c2i, 0, "i2t", 5)
    from vlr_lib import metrics

    m = metrics.retrieval_metrics(S, c2i, ks=(1, 5))
    assert f"rsum (K = 1,5) {m['rsum']:.0f}" in title(fig)
    other_query = E.retrieval_figure(S, c2i, 1, "i2t", 5)
    assert list(ranking(other_query)[1]) != list(ranking(fig)[1])
    other_dir = E.retrieval_figure(S, c2i, 0, "t2i", 5)
    assert len(ranking(other_dir)[1]) != len(ranking(fig)[1])
    S2, _ = batch(noise=3.0)
    assert title(E.retrieval_figure(S2, c2i, 0, "i2t", 5)) != title(fig)


@pytest.mark.parametrize(
    "kwargs, match",
    [(dict(query=6), "query"), (dict(query=-1), "query"), (dict(direction="both"), "direction"),
     (dict(k=0), "k"), (dict(k=31), "k"), (dict(direction="t2i", k=7), "k")],
)
def test_retrieval_figure_rejects_bad_input(kwargs, match):
    S, c2i = batch()
    args = dict(query=0, direction="i2t", k=5) | kwargs
    with pytest.raises(ValueError, match=match):
        E.retrieval_figure(S, c2i, **args)


def test_retrieval_figure_orders_tied_negatives_first():
    """A constant S: every negative ties the positives, so the bars show the rank the metrics give."""
    S = torch.zeros(4, 8)
    c2i = torch.arange(8) // 2
    fig = E.retrieval_figure(S, c2i, 0, "i2t", 1)
    pos_bars, neg_bars = fig.data[-2:]
    assert list(neg_bars.x) == [1, 2, 3, 4, 5, 6] and list(pos_bars.x) == [7, 8]
    assert "rank 7," in fig.layout.annotations[1].text
