"""vlr_lib.viz.cocos: which candidates contribute to a query's gradient (Bleeker & de Rijke eqs. 9-13).

The reference below is written from the paper's definitions with plain Python
floats (no vlr_lib.losses, no vlr_lib.analysis); the figure tests run the builders
over grids of control values.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from vlr_lib import analysis
from vlr_lib.notebook import demo_embeddings
from vlr_lib.similarity import similarity
from vlr_lib.viz import cocos as V

N = 8


@pytest.fixture(scope="module")
def S() -> torch.Tensor:
    img, txt = demo_embeddings(n=N, dim=16, noise=1.5, seed=0)
    return similarity(img, txt)


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))


def slow_contributions(S, loss, eps, margin, temperature, tau, direction) -> list[list[bool]]:
    """Eqs. 9a, 9b, 11, 13 for each query (row of the oriented S), one positive on the diagonal."""
    rows = [[float(v) for v in row] for row in (S if direction == "i2t" else S.T)]
    n = len(rows)
    out = []
    for q, row in enumerate(rows):
        s_pos = row[q]
        negs = [j for j in range(n) if j != q]
        if loss == "triplet":
            flags = {j: s_pos - row[j] < margin for j in negs}
        elif loss == "triplet_sh":
            h = max(negs, key=lambda j: row[j])
            flags = {j: j == h and s_pos - row[h] < margin for j in negs}
        elif loss == "nt_xent":
            z = sum(math.exp(v / temperature) for v in row)
            flags = {j: math.exp(row[j] / temperature) / z > eps for j in negs}
        else:
            g = {j: sigmoid((row[j] - s_pos) / tau) for j in negs}
            rank = 1 + sum(g.values())
            flags = {j: g[j] * (1 - g[j]) / tau / rank**2 > eps for j in negs}
        out.append([flags.get(j, False) for j in range(n)])
    return out


GRID = list(itertools.product(["triplet", "triplet_sh", "nt_xent", "smooth_ap"], [1e-3, 0.01, 0.2],
                              [0.0, 0.2, 0.8], ["i2t", "t2i"]))


@pytest.mark.parametrize("loss, eps, margin, direction", GRID)
def test_contributing_mask_matches_the_paper(S, loss, eps, margin, direction):
    for temperature, tau in ((0.1, 0.01), (0.5, 0.1)):
        mask = V.contributing_mask(S, loss, eps, margin, temperature, tau, direction)
        assert mask.tolist() == slow_contributions(S, loss, eps, margin, temperature, tau, direction)
        counts = analysis.cocos(S, loss, eps=eps, margin=margin, temperature=temperature, tau=tau)[direction]["C_q"]
        assert mask.sum(dim=1).tolist() == counts.round().long().tolist()


def test_query_gradients_values(S):
    """Off the diagonal: 1 per violating negative (triplet), p / tau (NT-Xent), sim / R^2 (SmoothAP)."""
    margin, temperature, tau = 0.3, 0.2, 0.05
    for direction in ("i2t", "t2i"):
        rows = S if direction == "i2t" else S.T
        G_t = V.query_gradients(S, "triplet", margin, direction=direction)
        G_n = V.query_gradients(S, "nt_xent", temperature=temperature, direction=direction)
        G_a = V.query_gradients(S, "smooth_ap", tau=tau, direction=direction)
        for q in range(N):
            row = [float(v) for v in rows[q]]
            z = sum(math.exp(v / temperature) for v in row)
            g = [sigmoid((v - row[q]) / tau) for v in row]
            rank = 1 + sum(g) - g[q]
            for j in range(N):
                if j == q:
                    continue
                assert float(G_t[q, j]) == (1.0 if row[q] - row[j] < margin else 0.0)
                assert float(G_n[q, j]) == pytest.approx(math.exp(row[j] / temperature) / z / temperature, rel=1e-9)
                assert float(G_a[q, j]) == pytest.approx(g[j] * (1 - g[j]) / tau / rank**2, rel=1e-9, abs=1e-300)


def test_hand_worked_batch():
    """Two queries; image 0 violates with caption 1 (0.5 vs 0.6 + margin), image 1 does not."""
    S = torch.tensor([[0.6, 0.5], [-0.5, 0.9]], dtype=torch.float64)
    assert V.contributing_mask(S, "triplet", margin=0.2).tolist() == [[False, True], [False, False]]
    # captions as queries: caption 0 (0.6 vs -0.5) is fine, caption 1 (0.9 vs 0.5) is fine at margin 0.2
    assert V.contributing_mask(S, "triplet", margin=0.2, direction="t2i").tolist() == [[False, False], [False, False]]
    assert V.contributing_mask(S, "triplet", margin=0.5, direction="t2i").tolist() == [[False, False], [True, False]]


def dots(fig, panel: int) -> set[tuple[int, int]]:
    tr = fig.data[3 * panel + 2]
    assert tr.name == "contributes to the query's gradient"
    return {(int(y), int(x)) for x, y in zip(tr.x, tr.y)}


@pytest.mark.parametrize("eps, margin, direction", list(itertools.product([1e-4, 0.01, 0.3], [0.0, 0.2, 1.0], ["i2t", "t2i"])))
def test_cocos_figure_grid(S, eps, margin, direction):
    fig = V.cocos_figure(S, eps, margin, 0.1, 0.01, direction)
    assert len(fig.data) == 12 and len(fig.layout.annotations) == 4
    for p, loss in enumerate(analysis.COCOS_LOSSES):
        expected = V.contributing_mask(S, loss, eps, margin, 0.1, 0.01, direction)
        assert dots(fig, p) == {tuple(ij) for ij in expected.nonzero().tolist()}
        c = analysis.cocos(S, loss, eps=eps, margin=margin, temperature=0.1, tau=0.01)[direction]
        title = fig.layout.annotations[p].text
        assert V.LOSS_LABELS[loss] in title and f"C<sup>0</sup> {c['C_0']}/{N}" in title
        assert len(dots(fig, p)) == round(float(c["C_B"]))
        z = np.asarray(fig.data[3 * p].z, dtype=float)
        np.testing.assert_allclose(z, (S if direction == "i2t" else S.T).numpy())
        assert list(fig.data[3 * p + 1].x) == list(range(N))  # the positives
    assert max(len([d for d in dots(fig, 1) if d[0] == q]) for q in range(N)) <= 1  # Triplet-SH
    assert fig.layout.yaxis.autorange == "reversed"


def test_cocos_figure_controls_change_the_right_panels(S):
    base = V.cocos_figure(S, 0.01, 0.2, 0.1, 0.01)
    wider = V.cocos_figure(S, 0.01, 0.6, 0.1, 0.01)
    stricter = V.cocos_figure(S, 0.1, 0.2, 0.1, 0.01)
    colder = V.cocos_figure(S, 0.01, 0.2, 0.02, 0.01)
    assert dots(base, 0) < dots(wider, 0) and dots(base, 2) == dots(wider, 2)
    assert dots(stricter, 2) < dots(base, 2) and dots(stricter, 0) == dots(base, 0)
    assert dots(colder, 2) != dots(base, 2)
    t2i = V.cocos_figure(S, 0.01, 0.2, 0.1, 0.01, "t2i")
    assert base.layout.title.text != t2i.layout.title.text


def history(n_epochs: int, c_q0: float, with_cocos: bool = True):
    out = []
    for e in range(1, n_epochs + 1):
        rec = {"epoch": e, "rsum": 100.0 + 10 * e}
        rec["cocos"] = (
            {d: {"C_q_mean_active": c_q0 / e, "C_0": e, "C_B": 10, "n_queries": 16} for d in ("i2t", "t2i")}
            if with_cocos else None
        )
        out.append(rec)
    return out


@pytest.mark.parametrize("direction", ["i2t", "t2i"])
def test_cocos_history_figure(direction):
    fig = V.cocos_history_figure({"a": history(4, 12.0), "b": history(3, 1.0), "c": history(2, 0.0, False)}, direction)
    assert len(fig.data) == 9
    a_cq, a_c0, a_rsum = fig.data[0], fig.data[1], fig.data[2]
    assert list(a_cq.x) == [1, 2, 3, 4] and list(a_cq.y) == pytest.approx([12.0, 6.0, 4.0, 3.0])
    assert list(a_c0.y) == [1, 2, 3, 4] and list(a_rsum.y) == [110, 120, 130, 140]
    assert list(fig.data[6].y) == [None, None]  # no COCOS rule: a gap
    assert [tr.showlegend for tr in fig.data[:3]] == [True, False, False]
    assert direction in fig.layout.title.text


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda S: V.query_gradients(S, "unified"), "loss"),
        (lambda S: V.query_gradients(S, "triplet", direction="both"), "direction"),
        (lambda S: V.query_gradients(S, "triplet", margin=-0.1), "margin"),
        (lambda S: V.query_gradients(S, "nt_xent", temperature=0.0), "temperature"),
        (lambda S: V.query_gradients(S, "smooth_ap", tau=-1.0), "tau"),
        (lambda S: V.contributing_mask(S, "nt_xent", eps=0.0), "eps"),
        (lambda S: V.query_gradients(S[:, :3], "triplet"), "S"),
        (lambda S: V.cocos_figure(S, direction="x"), "direction"),
        (lambda S: V.cocos_history_figure({}), "histories"),
        (lambda S: V.cocos_history_figure({"a": []}), "histories"),
    ],
)
def test_bad_input(S, call, match):
    with pytest.raises(ValueError, match=match):
        call(S)
