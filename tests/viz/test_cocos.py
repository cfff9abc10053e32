"""vlr_lib.viz.cocos: which candidates contribute to a query's gradient (Bleeker & de Rijke eqs. 9-13).

The figure tests run the builders over grids of control values; the marks and counts
they draw are vlr_lib.analysis's, tested in tests/core/test_analysis.py.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from tests.viz.helpers import title
from vlr_lib import analysis
from vlr_lib.demo import demo_embeddings
from vlr_lib.similarity import similarity
from vlr_lib.viz import cocos as V

N = 8


@pytest.fixture(scope="module")
def S() -> torch.Tensor:
    img, txt = demo_embeddings(n=N, dim=16, noise=1.5, seed=0)
    return similarity(img, txt)


def dots(fig, panel: int) -> set[tuple[int, int]]:
    tr = fig.data[3 * panel + 2]
    assert tr.name == "contributes to the query's gradient"
    return {(int(y), int(x)) for x, y in zip(tr.x, tr.y)}


@pytest.mark.parametrize("eps, margin, direction", list(itertools.product([1e-4, 0.01, 0.3], [0.0, 0.2, 1.0], ["i2t", "t2i"])))
def test_cocos_figure_grid(S, eps, margin, direction):
    fig = V.cocos_figure(S, analysis.CocosSettings(eps, margin), direction)
    assert len(fig.data) == 12 and len(fig.layout.annotations) == 4
    for p, loss in enumerate(analysis.COCOS_LOSSES):
        expected = analysis.cocos_mask(S, loss, analysis.CocosSettings(eps, margin), direction)
        assert dots(fig, p) == {tuple(ij) for ij in expected.nonzero().tolist()}
        c = analysis.cocos(S, loss, eps=eps, margin=margin, temperature=0.1, tau=0.01)[direction]
        title = fig.layout.annotations[p].text
        assert V.RULE_TITLES[loss] in title and f"C<sup>0</sup> {c['C_0']}/{N}" in title
        assert len(dots(fig, p)) == round(float(c["C_B"]))
        z = np.asarray(fig.data[3 * p].z, dtype=float)
        np.testing.assert_allclose(z, (S if direction == "i2t" else S.T).numpy())
        assert list(fig.data[3 * p + 1].x) == list(range(N))  # the positives
    assert max(len([d for d in dots(fig, 1) if d[0] == q]) for q in range(N)) <= 1  # Triplet-SH
    assert fig.layout.yaxis.autorange == "reversed"


def test_cocos_figure_controls_change_the_right_panels(S):
    base = V.cocos_figure(S)
    wider = V.cocos_figure(S, analysis.CocosSettings(margin=0.6))
    stricter = V.cocos_figure(S, analysis.CocosSettings(eps=0.1))
    colder = V.cocos_figure(S, analysis.CocosSettings(temperature=0.02))
    assert dots(base, 0) < dots(wider, 0) and dots(base, 2) == dots(wider, 2)
    assert dots(stricter, 2) < dots(base, 2) and dots(stricter, 0) == dots(base, 0)
    assert dots(colder, 2) != dots(base, 2)
    t2i = V.cocos_figure(S, direction="t2i")
    assert title(base) != title(t2i)


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
    assert direction in title(fig)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda S: V.cocos_figure(S, analysis.CocosSettings(margin=-0.1)), "margin"),
        (lambda S: V.cocos_figure(S, analysis.CocosSettings(temperature=0.0)), "temperature"),
        (lambda S: V.cocos_figure(S, analysis.CocosSettings(tau=-1.0)), "tau"),
        (lambda S: V.cocos_figure(S, analysis.CocosSettings(eps=0.0)), "eps"),
        (lambda S: V.cocos_figure(S[:, :3]), "S"),
        (lambda S: V.cocos_figure(S, direction="x"), "direction"),
        (lambda S: V.cocos_history_figure({}), "histories"),
        (lambda S: V.cocos_history_figure({"a": []}), "histories"),
    ],
)
def test_bad_input(S, call, match):
    with pytest.raises(ValueError, match=match):
        call(S)
