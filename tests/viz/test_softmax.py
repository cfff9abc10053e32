"""vlr_lib.viz.softmax: the partition functions of Veit & Wilber's four losses, PR curves, score distributions.

The references below are written from Veit & Wilber eqs. 1-6 with plain Python
loops in float64 and share no code with vlr_lib.losses; the figure tests run
each builder over grids of control values.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from vlr_lib import metrics
from vlr_lib.demo import demo_embeddings
from vlr_lib.similarity import similarity
from vlr_lib.viz import softmax as V
from vlr_lib.viz._style import POSITIVE

N = 8


@pytest.fixture(scope="module")
def S() -> torch.Tensor:
    img, txt = demo_embeddings(n=N, dim=16, noise=1.2, seed=0)
    return similarity(img, txt)


def slow_partition(S: torch.Tensor, q: int, variant: str, k: int, fraction: float) -> list[tuple[int, int]]:
    """Entries (row, column) of the negatives in query q's partition function, from eqs. 1, 3, 4, 6."""
    n = S.shape[0]
    row = [(q, j) for j in range(n) if j != q]  # eq. 1
    batch = [(i, j) for i in range(n) for j in range(n) if i != j]  # eq. 4
    by_score = lambda cells: sorted(cells, key=lambda c: float(S[c]), reverse=True)  # noqa: E731
    if variant == "sampled_softmax":
        return row
    if variant == "snm":
        return by_score(row)[:k]
    if variant == "cross_example_softmax":
        return batch
    return by_score(batch)[: math.ceil(round(fraction * len(batch), 9))]


def slow_term_and_weights(S, q, variant, k, fraction, lam):
    cells = slow_partition(S, q, variant, k, fraction)
    z = math.exp(lam * float(S[q, q])) + sum(math.exp(lam * float(S[c])) for c in cells)
    W = np.zeros(S.shape)
    for c in cells:
        W[c] = math.exp(lam * float(S[c])) / z
    W[q, q] = math.exp(lam * float(S[q, q])) / z
    return -math.log(W[q, q]), W


# --------------------------------------------------------------------------- partition functions


PER_PANEL = 5  # grey S, the partition's weights, the dots, the positive's halo and outline


def dots(fig, panel: int) -> set[tuple[int, int]]:
    """(row, column) of the 'negative in Z' markers of subplot `panel` (0-3)."""
    tr = fig.data[PER_PANEL * panel + 2]
    assert tr.name == "negative in Z"
    return {(int(y), int(x)) for x, y in zip(tr.x, tr.y)}


PARTITION_GRID = list(itertools.product([0, 7], [1, 7], [0.05, 1.0], [1.0, 50.0])) + [(3, 3, 0.5, 20.0), (5, 4, 0.3, 8.0)]


@pytest.mark.parametrize("q, k, fraction, scale", PARTITION_GRID)
def test_partition_figure_grid(S, q, k, fraction, scale):
    fig = V.partition_figure(S, q, k, fraction, scale)
    assert len(fig.data) == 4 * PER_PANEL and len(fig.layout.annotations) == 4
    for p, variant in enumerate(V.VARIANTS):
        assert dots(fig, p) == set(slow_partition(S, q, variant, k, fraction))
        z = np.array(fig.data[PER_PANEL * p + 1].z, dtype=object)
        vals = np.array([v for v in z.ravel() if v is not None], dtype=float)
        assert np.isfinite(vals).all() and (vals >= V.LOG_FLOOR).all() and (vals <= 0).all()
        assert len(vals) == len(dots(fig, p))  # colour exactly on the partition's negatives
        halo, pos = fig.data[PER_PANEL * p + 3: PER_PANEL * p + 5]
        assert list(pos.x) == list(halo.x) == [q] and list(pos.y) == [q] and pos.marker.color == POSITIVE
        term, W_ref = slow_term_and_weights(S, q, variant, k, fraction, scale)
        assert f"ℓ_q = {term:.3f}" in fig.layout.annotations[p].text
        shown = np.array([[np.nan if v is None else v for v in row] for row in fig.data[PER_PANEL * p + 1].z], dtype=float)
        inside = ~np.isnan(shown)
        np.testing.assert_allclose(shown[inside], np.maximum(np.log10(W_ref[inside]), V.LOG_FLOOR), rtol=1e-9)
    assert fig.layout.yaxis.autorange == "reversed"


def test_partition_figure_controls_change_the_right_panels(S):
    base = V.partition_figure(S, 1, 3, 0.5, 20.0)
    more_k = V.partition_figure(S, 1, 5, 0.5, 20.0)
    less_batch = V.partition_figure(S, 1, 3, 0.2, 20.0)
    assert dots(base, 1) != dots(more_k, 1) and dots(base, 3) == dots(more_k, 3)
    assert dots(base, 3) != dots(less_batch, 3) and dots(base, 1) == dots(less_batch, 1)
    other_query = V.partition_figure(S, 4, 3, 0.5, 20.0)
    assert dots(base, 0) != dots(other_query, 0)
    hotter = V.partition_figure(S, 1, 3, 0.5, 5.0)
    assert not np.array_equal(np.array(base.data[1].z, dtype=object), np.array(hotter.data[1].z, dtype=object))


# --------------------------------------------------------------------------- calibration


def five_caption_results(seed: int = 0, n_img: int = 6, shift: float = 0.0):
    g = torch.Generator().manual_seed(seed)
    c2i = torch.arange(n_img).repeat_interleave(5)
    S = torch.rand(n_img, 5 * n_img, generator=g, dtype=torch.float64) * 1.2 - 0.6
    S = S + 0.5 * (torch.arange(n_img)[:, None] == c2i[None, :]) + shift * torch.randn(1, 5 * n_img, generator=g)
    return S.clamp(-1, 1), c2i


@pytest.fixture(scope="module")
def results():
    return {"a": five_caption_results(0), "b": five_caption_results(1, shift=0.3)}


def test_pr_figure_draws_the_integrated_steps(results):
    fig = V.pr_figure(results)
    assert len(fig.data) == 3
    for tr, (S, c2i) in zip(fig.data[:2], results.values()):
        x, y = np.asarray(tr.x, dtype=float), np.asarray(tr.y, dtype=float)
        assert tr.line.shape == "vh" and x[0] == 0.0 and x[-1] == pytest.approx(1.0)
        assert np.all(np.diff(x) >= 0) and np.isfinite(y).all() and ((y >= 0) & (y <= 1)).all()
        auc = metrics.pr_auc(S, c2i)
        assert float(np.sum(np.diff(x) * y[1:])) == pytest.approx(auc)  # the plotted steps integrate to PR-AUC
        assert f"PR-AUC {auc:.3f}" in tr.name
    base = fig.data[2]
    assert list(base.y) == pytest.approx([1 / 6, 1 / 6])  # one image of six matches each caption
    assert tuple(fig.layout.xaxis.range) == (0.0, 1.0)


@pytest.mark.parametrize("threshold", [None, -0.5, 0.2, 0.9])
@pytest.mark.parametrize("n_queries", [1, 5, 40])
@pytest.mark.parametrize("direction", ["t2i", "i2t"])
def test_query_scores_figure_grid(results, threshold, n_queries, direction):
    fig = V.query_scores_figure(results, threshold, n_queries, direction)
    assert len(fig.data) == 4  # boxes + positives per model
    for m, (name, (S, c2i)) in enumerate(results.items()):
        box, dots_ = fig.data[2 * m], fig.data[2 * m + 1]
        n_q = S.shape[1] if direction == "t2i" else S.shape[0]
        shown = min(n_queries, n_q)
        assert len(set(box.x)) == shown
        per_query_pos = 1 if direction == "t2i" else 5
        assert len(dots_.y) == shown * per_query_pos and len(box.y) == shown * (S.numel() // n_q - per_query_pos)
        ys = np.concatenate([np.asarray(box.y, float), np.asarray(dots_.y, float)])
        assert np.isfinite(ys).all() and (np.abs(ys) <= 1).all()
        # queries are ordered by their (best) positive's score
        best = {}
        for x, y in zip(dots_.x, dots_.y):
            best[x] = max(best.get(x, -9), y)
        order = list(dict.fromkeys(dots_.x))
        assert [best[x] for x in order] == sorted(best[x] for x in order)
        title = fig.layout.annotations[m].text
        if threshold is None:
            assert title == name
        else:
            p, r = metrics.precision_recall_at(S, c2i, threshold)
            assert f"precision {p:.2f}, recall {r:.2f}" in title
    assert len(fig.layout.shapes) == (0 if threshold is None else 2)
    lo, hi = fig.layout.yaxis.range
    drawn = [np.asarray(tr.y, float) for tr in fig.data] + ([[threshold]] if threshold is not None else [])
    values = np.concatenate(drawn)
    assert -1.0 <= lo <= values.min() and values.max() <= hi <= 1.0


def test_query_scores_threshold_moves_the_line(results):
    a = V.query_scores_figure(results, 0.1)
    b = V.query_scores_figure(results, 0.4)
    assert a.layout.shapes[0].y0 == 0.1 and b.layout.shapes[0].y0 == 0.4
    assert a.layout.annotations[0].text != b.layout.annotations[0].text


@pytest.mark.parametrize("direction", ["t2i", "i2t"])
@pytest.mark.parametrize("max_lines", [1, 7, 100])
@pytest.mark.parametrize("percentiles", [(5.0, 95.0), (25.0, 75.0)])
def test_neighbor_count_figure_grid(results, direction, max_lines, percentiles):
    fig = V.neighbor_count_figure(results, direction, max_lines, percentiles, grid_size=21)
    n_q = 30 if direction == "t2i" else 6
    lines = min(max_lines, n_q)
    assert len(fig.data) == 2 * (lines + 2)
    S, _ = results["a"]
    counts = metrics.neighbor_counts(S, np.linspace(-1, 1, 21), direction).numpy()
    lo, hi = fig.data[lines], fig.data[lines + 1]
    for tr, p in ((lo, percentiles[0]), (hi, percentiles[1])):
        expected = np.percentile(counts, p, axis=0)
        got = np.array([np.nan if v is None else v for v in tr.y], dtype=float)
        np.testing.assert_allclose(got[expected > 0], expected[expected > 0])
        assert all(v is None for v, e in zip(tr.y, expected) if e == 0)  # zero counts are gaps on a log axis
    assert fig.layout.yaxis.type == "log" and tuple(fig.layout.xaxis.range) == (-1.0, 1.0)


def test_neighbor_count_figure_changes_with_direction(results):
    a = V.neighbor_count_figure(results, "t2i", grid_size=21)
    b = V.neighbor_count_figure(results, "i2t", grid_size=21)
    assert len(a.data) != len(b.data) or any(list(x.y) != list(y.y) for x, y in zip(a.data, b.data))


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda S, R: V.partition_figure(S, N), "query"),
        (lambda S, R: V.partition_figure(S, 0, k=0), "topk"),
        (lambda S, R: V.partition_figure(S, 0, k=N), "topk"),
        (lambda S, R: V.partition_figure(S, 0, fraction=0.0), "topk"),
        (lambda S, R: V.partition_figure(S, 0, fraction=1.5), "topk"),
        (lambda S, R: V.partition_figure(S, 0, scale=0.0), "scale"),
        (lambda S, R: V.partition_figure(S[:, :3]), "S"),
        (lambda S, R: V.pr_figure({}), "results"),
        (lambda S, R: V.pr_figure({"x": (S,)}), "results"),
        (lambda S, R: V.query_scores_figure(R, n_queries=0), "n_queries"),
        (lambda S, R: V.query_scores_figure(R, direction="both"), "direction"),
        (lambda S, R: V.neighbor_count_figure(R, percentiles=(95.0, 5.0)), "percentiles"),
        (lambda S, R: V.neighbor_count_figure(R, percentiles=(5.0, 50.0, 95.0)), "percentiles must be 2 values"),
        (lambda S, R: V.neighbor_count_figure(R, "x"), "direction"),
    ],
)
def test_bad_input(S, results, call, match):
    with pytest.raises(ValueError, match=match):
        call(S, results)
