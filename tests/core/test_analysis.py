"""vlr_lib.analysis: COCOS against slow loop references and loss gradients; tangent gradients.

The COCOS references below are written from Bleeker & de Rijke sec. 4 with plain
Python floats; the gradient cross-checks read the same counts off autograd
gradients of vlr_lib.losses (eqs. 9-13 say which gradient entries are non-zero or
what they are worth). The tangent-gradient tests use an independent identity
(tangent norm = |x_raw| |dL/dx_raw|), hand-derived geometry of Li et al. Fig. 2,
and the limit Li et al. use to explain Triplet-HN's vanishing gradient.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.autograd.functional import jacobian

from tests.core import references as refs
from vlr_lib import analysis as A
from vlr_lib import losses as L
from vlr_lib.similarity import l2_normalize, similarity

# --------------------------------------------------------------------------- fixtures


def spread_S(n: int = 7, m: int | None = None, seed: int = 0) -> torch.Tensor:
    """Scores in [-1, 1] with a boost for the diagonal: some queries violate, some do not."""
    g = torch.Generator().manual_seed(seed)
    S = torch.rand(n, m or n, generator=g, dtype=torch.float64) * 2 - 1
    if m is None:
        S = S + 0.6 * torch.eye(n, dtype=torch.float64)
    return S


def tied_S(n: int = 7, m: int | None = None, seed: int = 0, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Scores packed within a few tau = 0.01 of each other, so SmoothAP has contributing pairs;
    the positives of even rows are lifted 0.3 above the pack, so some queries have none."""
    g = torch.Generator().manual_seed(seed)
    S = 0.5 + 0.03 * torch.randn(n, m or n, generator=g, dtype=torch.float64)
    mask = torch.eye(n, dtype=torch.bool) if mask is None else mask
    lift = mask & (torch.arange(n) % 2 == 0)[:, None]
    return S + 0.3 * lift


def five_caption_mask(n_img: int = 3) -> torch.Tensor:
    """n_img images x 5 n_img captions; caption c describes image c // 5."""
    return torch.arange(n_img)[:, None] == (torch.arange(5 * n_img) // 5)[None, :]


def repeated_image_mask() -> torch.Tensor:
    """Six pairs, image 2 appears twice (rows / columns 2 and 4)."""
    ids = torch.tensor([0, 1, 2, 3, 2, 5])
    return ids[:, None] == ids[None, :]


def directions(S: torch.Tensor, mask: torch.Tensor | None):
    """(name, scores with queries as rows, positive mask) for i2t and t2i."""
    if mask is None:
        mask = torch.eye(S.shape[0], dtype=torch.bool)
    return [("i2t", S, mask), ("t2i", S.T.contiguous(), mask.T.contiguous())]


# --------------------------------------------------------------------------- slow references


def _sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def ref_per_query(S: torch.Tensor, mask: torch.Tensor, loss: str, eps, margin, temperature, tau):
    """Per query (rows of S): C^q, and for NT-Xent W^- and W^+, from Bleeker sec. 4 with loops."""
    s, pos = S.tolist(), mask.tolist()
    out = []
    for q in range(len(s)):
        P = [j for j in range(len(s[q])) if pos[q][j]]
        N = [j for j in range(len(s[q])) if not pos[q][j]]
        c, w_neg, w_pos = 0.0, [], []
        for i in P:
            sp = s[q][i]
            if loss == "triplet":  # eq. 9b: every negative with s+ - s- < alpha
                c += sum(1 for n in N if sp - s[q][n] < margin)
            elif loss == "triplet_sh":  # eq. 10: the hardest negative only
                c += 1 if sp - max(s[q][n] for n in N) < margin else 0
            elif loss == "nt_xent":  # eq. 11 weights, Z over the positive and the negatives
                Z = math.exp(sp / temperature) + sum(math.exp(s[q][n] / temperature) for n in N)
                ws = [math.exp(s[q][n] / temperature) / Z for n in N]
                c += sum(1 for w in ws if w > eps)
                w_neg.append(sum(w for w in ws if w > eps))
                w_pos.append(1.0 - math.exp(sp / temperature) / Z)
            else:  # eq. 13, D_ij = s_j - s_i, sim = G (1 - G) / tau
                others = [j for j in range(len(s[q])) if j != i]
                G = {j: _sig((s[q][j] - sp) / tau) for j in others}
                R = 1.0 + sum(G.values())
                c += sum(1 for j in others if G[j] * (1 - G[j]) / tau / R**2 > eps) / len(P)
        out.append((c, sum(w_neg) / len(P) if w_neg else None, sum(w_pos) / len(P) if w_pos else None))
    return out


def ref_summary(per_query):
    cs = [c for c, _, _ in per_query]
    active = [c for c in cs if c > 0]
    d = {
        "C_q_mean": sum(cs) / len(cs),
        "C_q_mean_active": sum(active) / len(active) if active else math.nan,
        "C_B": sum(cs),
        "C_0": sum(1 for c in cs if c == 0),
    }
    if per_query[0][1] is not None:
        d["W_neg"] = sum(w for _, w, _ in per_query) / len(cs)
        d["W_pos"] = sum(w for _, _, w in per_query) / len(cs)
    return d


KW = dict(eps=0.01, margin=0.2, temperature=0.1, tau=0.01)

# --------------------------------------------------------------------------- COCOS vs the references


@pytest.mark.parametrize("loss", A.COCOS_LOSSES)
@pytest.mark.parametrize(
    "make, mask",
    [
        (lambda seed: spread_S(7, seed=seed), None),
        (lambda seed: tied_S(7, seed=seed), None),
        (lambda seed: tied_S(3, 15, seed=seed, mask=five_caption_mask()), five_caption_mask()),
        (lambda seed: spread_S(6, 6, seed=seed), repeated_image_mask()),
    ],
    ids=["diag-spread", "diag-tied", "five-captions", "repeated-image"],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_cocos_matches_slow_reference(loss, make, mask, seed):
    S = make(seed)
    kw = dict(KW, eps=0.02) if seed else KW
    got = A.cocos(S, loss, pos_mask=mask, **kw)
    for name, S_dir, M in directions(S, mask):
        per_query = ref_per_query(S_dir, M, loss, **kw)
        want = ref_summary(per_query)
        d = got[name]
        assert d["n_queries"] == S_dir.shape[0]
        assert d["C_q"].tolist() == pytest.approx([c for c, _, _ in per_query])
        for key, value in want.items():
            assert d[key] == pytest.approx(value, nan_ok=True), (name, key)
        assert isinstance(d["C_0"], int)
        assert isinstance(d["C_B"], float if loss == "smooth_ap" else int)


def test_fixtures_are_not_degenerate():
    """The reference comparisons above must see both zero and non-zero counts."""
    cases = [("triplet", spread_S()), ("triplet_sh", spread_S()), ("nt_xent", spread_S()), ("smooth_ap", tied_S())]
    for loss, S in cases:
        d = A.cocos(S, loss, **KW)["i2t"]
        assert d["C_B"] > 0, loss
    assert A.cocos(spread_S(), "triplet")["i2t"]["C_0"] > 0
    assert 0 < A.cocos(tied_S(), "smooth_ap")["i2t"]["C_0"] < 7


# --------------------------------------------------------------------------- hand-worked example

HAND_S = torch.tensor([[0.90, 0.80, 0.10], [0.35, 0.50, 0.60], [0.20, 0.10, 0.70]], dtype=torch.float64)


def test_hand_worked_triplets():
    # Rows (i2t), margin 0.2: row 0: 0.9-0.8=0.1 < 0.2 yes, 0.9-0.1 no -> 1; row 1: 0.5-0.35=0.15
    # yes, 0.5-0.6 < 0 yes -> 2; row 2: 0.5, 0.6 -> 0. Columns (t2i): col 0: 0.9-0.35, 0.9-0.2 -> 0;
    # col 1: 0.5-0.8 yes, 0.5-0.1 no -> 1; col 2: 0.7-0.1 no, 0.7-0.6 yes -> 1.
    d = A.cocos(HAND_S, "triplet", margin=0.2)
    assert d["i2t"]["C_q"].tolist() == [1, 2, 0]
    assert (d["i2t"]["C_B"], d["i2t"]["C_0"], d["i2t"]["C_q_mean"], d["i2t"]["C_q_mean_active"]) == (3, 1, 1.0, 1.5)
    assert d["t2i"]["C_q"].tolist() == [0, 1, 1]
    assert (d["t2i"]["C_B"], d["t2i"]["C_0"]) == (2, 1)
    # Hardest negatives: rows 0.8 (viol.), 0.6 (viol.), 0.2 (0.5 > 0.2 no); columns 0.35 (no), 0.8, 0.6.
    sh = A.cocos(HAND_S, "triplet_sh", margin=0.2)
    assert sh["i2t"]["C_q"].tolist() == [1, 1, 0] and sh["t2i"]["C_q"].tolist() == [0, 1, 1]
    assert sh["i2t"]["C_q_mean_active"] == 1.0  # Table 2: Triplet-SH always 1 +- 0


def test_hand_worked_nt_xent_row0():
    # Row 0 at tau = 0.1: logits 9, 8, 1; Z = e^9 + e^8 + e^1.
    d = A.cocos(HAND_S, "nt_xent", temperature=0.1, eps=0.01)
    w8 = 1.0 / (math.e + 1.0 + math.exp(-7.0))  # e^8 / Z ~ 0.269 > eps
    w1 = math.exp(-8.0) / (1.0 + math.exp(-1.0) + math.exp(-8.0))  # ~ 2.5e-4 < eps
    w_pos = 1.0 - 1.0 / (1.0 + math.exp(-1.0) + math.exp(-8.0))
    assert d["i2t"]["C_q"][0] == 1
    # W is a mean over queries: give every query row 0's scores (positive on the diagonal).
    S_rep = HAND_S[[0, 0, 0]][:, [0, 1, 2]].clone()
    S_rep[1], S_rep[2] = HAND_S[0, [1, 0, 2]], HAND_S[0, [2, 1, 0]]  # each row: same scores, positive first
    d_rep = A.cocos(S_rep, "nt_xent", temperature=0.1, eps=0.01)["i2t"]
    assert d_rep["W_neg"] == pytest.approx(w8) and d_rep["W_pos"] == pytest.approx(w8 + w1)
    assert d_rep["W_pos"] == pytest.approx(w_pos)


def test_hand_worked_smooth_ap_includes_one_over_tau():
    """Appendix eq. 24: sim(D) = G(1 - G)/tau. A negative 5 tau below the positive counts with the
    1/tau factor (sim = 0.665 > 0.01) and would not without it (0.0066 < 0.01)."""
    tau = 0.01
    S = torch.tensor([[0.50, 0.45], [0.0, 0.9]], dtype=torch.float64)
    d = A.cocos(S, "smooth_ap", tau=tau, eps=0.01)["i2t"]
    G = _sig(-5.0)
    R = 1.0 + G
    assert G * (1 - G) / tau / R**2 > 0.01 > G * (1 - G) / R**2
    assert d["C_q"].tolist() == [1.0, 0.0]  # row 1: 0.0 is 90 tau below 0.9 -> negligible
    # A tie (D = 0): G = 1/2, R = 1.5, sim / R^2 = (0.25 / tau) / 2.25 > eps.
    tie = torch.tensor([[0.3, 0.3], [0.3, 0.3]], dtype=torch.float64)
    assert A.cocos(tie, "smooth_ap", tau=tau)["i2t"]["C_q"].tolist() == [1.0, 1.0]


def test_smooth_ap_sign_of_D_counts_candidates_above():
    """R(i, Omega) counts candidates ranked above i: one negative far above the positive makes R ~ 2,
    which divides sim by ~4. With the other sign of D, R would stay ~1 and the count would flip."""
    tau, eps = 0.01, 2.0
    # Row 0: positive 0.50; a tied negative 0.525 (x = 2.5) and a negative far above (0.9).
    S = torch.tensor([[0.50, 0.525, 0.9], [0.0, 0.9, 0.0], [0.0, 0.0, 0.9]], dtype=torch.float64)
    sim = _sig(2.5) * (1 - _sig(2.5)) / tau
    R_above = 1.0 + _sig(2.5) + _sig(40.0)
    R_below = 1.0 + _sig(-2.5) + _sig(-40.0)
    assert sim / R_above**2 < eps < sim / R_below**2
    assert A.cocos(S, "smooth_ap", tau=tau, eps=eps)["i2t"]["C_q"][0] == 0.0


# --------------------------------------------------------------------------- cross-checks with gradients


def per_pair_row_grads(loss_fn, X, M):
    """Jacobian of per-pair losses (reduction "none") w.r.t. X: [P, n_rows, n_cols]."""
    return jacobian(lambda Y: loss_fn(Y, M), X)


MASKS = [
    pytest.param(lambda: (spread_S(7, seed=3), None), id="diag"),
    pytest.param(lambda: (spread_S(6, seed=4), repeated_image_mask()), id="repeated-image"),
    pytest.param(lambda: (spread_S(3, 15, seed=5), five_caption_mask()), id="five-captions"),
]


@pytest.mark.parametrize("case", MASKS)
def test_triplet_counts_are_nonzero_gradients_of_triplet_all(case):
    """Eq. 9b: a negative contributes iff d triplet_all / d s- != 0 in the query's row (value 1)."""
    S, mask = case()
    got = A.cocos(S, "triplet", margin=0.2, pos_mask=mask)
    for name, X, M in directions(S, mask):
        # Per pair (q, c) of the row view, its row-q entries come only from its q->candidates term:
        # its other term lives in column c, which meets row q at the positive only.
        J = per_pair_row_grads(lambda Y, M: L.triplet_all(Y, 0.2, "none", pos_mask=M), X, M)
        counts = torch.zeros(X.shape[0], dtype=torch.long)
        for p, (q, c) in enumerate(M.nonzero().tolist()):
            row = J[p, q][~M[q]]
            assert torch.all((row == 0) | (row == 1))
            counts[q] += int((row != 0).sum())
        assert got[name]["C_q"].tolist() == counts.tolist(), name
        assert got[name]["C_B"] > 0


@pytest.mark.parametrize("case", MASKS)
def test_triplet_sh_counts_are_queries_with_gradient(case):
    """Eqs. 9a/10: an anchor term contributes iff triplet_hardest sends a gradient to one negative."""
    S, mask = case()
    got = A.cocos(S, "triplet_sh", margin=0.2, pos_mask=mask)
    for name, X, M in directions(S, mask):
        J = per_pair_row_grads(lambda Y, M: L.triplet_hardest(Y, 0.2, "none", pos_mask=M), X, M)
        counts = torch.zeros(X.shape[0], dtype=torch.long)
        for p, (q, c) in enumerate(M.nonzero().tolist()):
            n_nonzero = int((J[p, q][~M[q]] != 0).sum())
            assert n_nonzero <= 1
            counts[q] += n_nonzero
        assert got[name]["C_q"].tolist() == counts.tolist(), name
    if mask is None:
        assert got["i2t"]["C_B"] + got["i2t"]["C_0"] == 7  # one anchor term per query


@pytest.mark.parametrize("case", MASKS)
@pytest.mark.parametrize("temperature, eps", [(0.1, 0.01), (0.3, 0.05)])
def test_nt_xent_weights_are_tau_times_gradients(case, temperature, eps):
    """Eq. 11: the weight of a negative is tau * d loss / d s-, that of the positive 1 - tau * |d loss / d s+|.

    Read off the one-direction NT-Xent (sampled_softmax at scale 1/tau, rows as queries), and
    for the negatives also off info_nce (both directions) -- they must agree.
    """
    S, mask = case()
    got = A.cocos(S, "nt_xent", eps=eps, temperature=temperature, pos_mask=mask)
    for name, X, M in directions(S, mask):
        J1 = per_pair_row_grads(lambda Y, M: L.sampled_softmax(Y, 1.0 / temperature, None, "none", pos_mask=M), X, M)
        J2 = per_pair_row_grads(lambda Y, M: L.info_nce(Y, temperature, "none", pos_mask=M), X, M)
        n_q = X.shape[0]
        counts = torch.zeros(n_q, dtype=torch.long)
        w_neg, w_pos = torch.zeros(n_q, dtype=torch.float64), torch.zeros(n_q, dtype=torch.float64)
        n_pos = M.sum(dim=1).tolist()
        for p, (q, c) in enumerate(M.nonzero().tolist()):
            weights = temperature * J1[p, q][~M[q]]
            torch.testing.assert_close(weights, temperature * J2[p, q][~M[q]])
            counts[q] += int((weights > eps).sum())
            w_neg[q] += float(weights[weights > eps].sum()) / n_pos[q]
            w_pos[q] += float(-temperature * J1[p, q, c]) / n_pos[q]
        assert got[name]["C_q"].tolist() == counts.tolist(), name
        assert got[name]["W_neg"] == pytest.approx(float(w_neg.mean()), rel=1e-9)
        assert got[name]["W_pos"] == pytest.approx(float(w_pos.mean()), rel=1e-9)
        assert got[name]["W_neg"] <= got[name]["W_pos"] + 1e-12  # W- only keeps part of 1 - p+


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("five", [False, True])
def test_smooth_ap_terms_are_gradients_with_one_positive(seed, five):
    """With one positive per query, d(1 - AP_q)/d s_j = sim(D_qj) / R(q, Omega)^2 exactly (eq. 12 with
    R(i, P) = 1): the thresholded quantity of eq. 13 is the gradient of losses.smooth_ap."""
    tau, eps = 0.01, 0.01
    if five:  # t2i of a 5-captions batch: caption queries, one positive image each
        S, mask = tied_S(3, 15, seed=seed, mask=five_caption_mask()), five_caption_mask()
        name, X, M = directions(S, mask)[1]
    else:
        S, mask = tied_S(8, seed=seed), None
        name, X, M = directions(S, mask)[0]
    got = A.cocos(S, "smooth_ap", tau=tau, eps=eps, pos_mask=mask)[name]
    J = per_pair_row_grads(lambda Y, M: L.smooth_ap(Y, tau, pos_mask=M, reduction="none"), X, M)
    counts = []
    for q in range(X.shape[0]):
        row = J[q, q][~M[q]]
        assert torch.all(row >= 0)  # a candidate above or near the positive only hurts AP
        counts.append(float((row > eps).sum()))
    assert got["C_q"].tolist() == counts
    assert 0 < got["C_0"] < X.shape[0]


# --------------------------------------------------------------------------- table, conventions, inputs


def test_table_convention_active_mean():
    """Tables 2 and 4 report C^q over queries with a gradient: C^q = C^B / (|B| - C^0)."""
    for seed in range(3):
        d = A.cocos(spread_S(9, seed=seed), "triplet")["i2t"]
        assert d["C_q_mean_active"] == pytest.approx(d["C_B"] / (d["n_queries"] - d["C_0"]))
        assert d["C_q_mean"] == pytest.approx(d["C_B"] / d["n_queries"])
    # No query with a gradient: the active mean is undefined (NaN), the plain mean 0.
    far = torch.eye(4, dtype=torch.float64)
    d = A.cocos(far, "triplet_sh")["t2i"]
    assert d["C_B"] == 0 and d["C_0"] == 4 and d["C_q_mean"] == 0.0 and math.isnan(d["C_q_mean_active"])


def test_cocos_table_layout_matches_cocos():
    S, mask = tied_S(3, 15, seed=1, mask=five_caption_mask()), five_caption_mask()
    table = A.cocos_table(S, eps=0.01, tau=0.01, pos_mask=mask)
    assert len(table) == 8
    assert list(table.columns[:3]) == ["table", "loss", "direction"]
    assert table["table"].tolist() == [2, 2, 2, 2, 3, 3, 4, 4]
    assert table["direction"].tolist() == ["i2t", "t2i"] * 4
    for _, row in table.iterrows():
        d = A.cocos(S, row["loss"], eps=0.01, tau=0.01, pos_mask=mask)[row["direction"]]
        assert row["C_q"] == pytest.approx(d["C_q_mean_active"], nan_ok=True)
        assert row["C_q_all"] == pytest.approx(d["C_q_mean"])
        assert (row["C_B"], row["C_0"], row["n_queries"]) == (pytest.approx(d["C_B"]), d["C_0"], d["n_queries"])
        assert math.isnan(row["W_neg"]) == (row["loss"] != "nt_xent")
    assert table.loc[table["direction"] == "t2i", "n_queries"].eq(15).all()
    small = A.cocos_table(S, pos_mask=mask, losses=("nt_xent",))
    assert small["loss"].tolist() == ["nt_xent", "nt_xent"]


def test_cocos_does_not_track_gradients():
    S = spread_S().requires_grad_()
    d = A.cocos(S, "nt_xent")
    assert not d["i2t"]["C_q"].requires_grad and S.grad is None


@pytest.mark.parametrize(
    "kwargs, arg",
    [
        (dict(loss="triplet_hardest"), "loss"),
        (dict(loss="nt_xent", eps=0.0), "eps"),
        (dict(loss="smooth_ap", eps=-0.1), "eps"),
        (dict(loss="nt_xent", temperature=0.0), "temperature"),
        (dict(loss="nt_xent", temperature=-1.0), "temperature"),
        (dict(loss="smooth_ap", tau=0.0), "tau"),
        (dict(loss="triplet", margin=-0.1), "margin"),
        (dict(loss="triplet", eps=float("nan")), "eps"),
    ],
)
def test_cocos_bad_arguments(kwargs, arg):
    with pytest.raises(ValueError, match=f"^{arg}"):
        A.cocos(spread_S(), **kwargs)


def test_cocos_bad_S_and_mask():
    S = spread_S()
    S[2, 3] = float("nan")
    with pytest.raises(ValueError, match="^S"):
        A.cocos(S, "triplet")
    with pytest.raises(ValueError, match="^S"):
        A.cocos(spread_S(3, 5), "triplet")  # rectangular without a mask
    with pytest.raises(ValueError, match="^pos_mask"):
        A.cocos(spread_S(4), "triplet", pos_mask=torch.eye(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="^pos_mask"):  # a caption query without a positive
        A.cocos(spread_S(3, 4), "nt_xent", pos_mask=torch.eye(3, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="^S"):
        A.cocos([[1.0, 0.0], [0.0, 1.0]], "triplet")


# --------------------------------------------------------------------------- tangent gradients


def raw_embeddings(n: int = 5, d: int = 4, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    scale = lambda: 0.5 + 2 * torch.rand(n, 1, generator=g, dtype=torch.float64)  # noqa: E731
    img = torch.randn(n, d, generator=g, dtype=torch.float64) * scale()
    txt = torch.randn(n, d, generator=g, dtype=torch.float64) * scale()
    return img, txt


LOSS_FNS = {
    "triplet_hardest": lambda S: L.triplet_hardest(S, 0.2),
    "info_nce": lambda S: L.info_nce(S, 0.1),
    "unified": lambda S: L.unified(S, 0.2, 10.0),
}


@pytest.mark.parametrize("name", LOSS_FNS)
def test_tangent_norm_is_what_the_raw_embedding_receives(name):
    """d L / d x_raw = (I - x x^T) g / |x_raw|: the tangent norm is |x_raw| |d L / d x_raw|."""
    img, txt = raw_embeddings(seed=1)
    r = A.tangent_gradient_norms(img, txt, LOSS_FNS[name])
    a, b = img.clone().requires_grad_(), txt.clone().requires_grad_()
    LOSS_FNS[name](similarity(a, b)).backward()
    torch.testing.assert_close(r.img, img.norm(dim=1) * a.grad.norm(dim=1))
    torch.testing.assert_close(r["txt"], txt.norm(dim=1) * b.grad.norm(dim=1))
    assert float(r.img.max()) > 0


def test_tangent_radial_split_loop_reference():
    img, txt = raw_embeddings(n=4, d=3, seed=2)
    loss_fn = LOSS_FNS["info_nce"]
    r = A.tangent_gradient_norms(img, txt, loss_fn)
    v = l2_normalize(img).requires_grad_()
    t = l2_normalize(txt).requires_grad_()
    loss_fn(v @ t.T).backward()
    sides = [(v, v.grad, r.img, r.img_radial, r.img_tangent), (t, t.grad, r.txt, r.txt_radial, r.txt_tangent)]
    for x, g, norms, radial, tangent in sides:
        for k in range(x.shape[0]):
            xk, gk = x[k].tolist(), g[k].tolist()
            dot = sum(a * b for a, b in zip(gk, xk))
            tan = [a - dot * b for a, b in zip(gk, xk)]
            assert float(radial[k]) == pytest.approx(dot)
            assert tangent[k].tolist() == pytest.approx(tan)
            assert float(norms[k]) == pytest.approx(math.sqrt(sum(a * a for a in tan)))
            assert sum(a * b for a, b in zip(tan, xk)) == pytest.approx(0.0, abs=1e-12)
    assert not r.img.requires_grad and img.grad is None


def fig2_vectors(theta_pos: float, theta_neg: float, phi: float, d: int = 5, seed: int = 0):
    """Unit anchor v, positive t, negative t^ of Li et al. Fig. 2, rotated into R^d at random."""
    v = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    t = torch.tensor([math.sin(theta_pos), 0.0, math.cos(theta_pos)], dtype=torch.float64)
    tn = torch.tensor(
        [math.sin(theta_neg) * math.cos(phi), math.sin(theta_neg) * math.sin(phi), math.cos(theta_neg)],
        dtype=torch.float64,
    )
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    lift = lambda x: Q @ torch.cat([x, x.new_zeros(d - 3)])  # noqa: E731
    return lift(v), lift(t), lift(tn)


def triplet_hn_anchor0(margin: float):
    """Li et al. eq. 8 for anchor image 0, positive caption 0, hardest negative caption 1."""
    return lambda S: F.relu(S[0, 1] - S[0, 0] + margin)


ANGLES = [(0.6, 0.5, 2.0), (0.3, 0.3, math.pi), (1.2, 0.9, 0.4), (0.2, 1.5, 1.0), (0.7, 0.65, 0.0)]


@pytest.mark.parametrize("theta_pos, theta_neg, phi", ANGLES)
def test_triplet_hn_closed_form_matches_autograd(theta_pos, theta_neg, phi):
    v, t, tn = fig2_vectors(theta_pos, theta_neg, phi)
    w = -v  # a second image that takes no part in the loss
    img = torch.stack([2.0 * v, 0.7 * w])
    txt = torch.stack([0.5 * t, 3.0 * tn])
    r = A.tangent_gradient_norms(img, txt, triplet_hn_anchor0(0.2))
    c = A.triplet_hn_tangent_norm(theta_pos, theta_neg, phi, margin=0.2)
    active = math.cos(theta_neg) - math.cos(theta_pos) + 0.2 > 0
    assert (float(c.anchor) > 0) == active
    assert float(r.img[0]) == pytest.approx(float(c.anchor), abs=1e-12)
    assert float(r.txt[1]) == pytest.approx(float(c["negative"]), abs=1e-12)
    assert float(r.txt[0]) == pytest.approx(float(c.positive), abs=1e-12)
    assert float(r.img[1]) == 0.0


def test_triplet_hn_closed_form_with_library_loss():
    """A batch in which only image 0's i2t term of losses.triplet_hardest is active (checked by hand:
    with theta+ = 0.3, theta- = 0.7, phi = pi and image 1 = caption 1 every other hinge is < 0)."""
    tp, tn_, phi = 0.3, 0.7, math.pi
    v, t, tn = fig2_vectors(tp, tn_, phi, d=4, seed=3)
    img, txt = torch.stack([v, tn]), torch.stack([t, tn])
    S = similarity(img, txt)
    terms = torch.stack([S[0, 1] - S[0, 0], S[1, 0] - S[1, 1], S[1, 0] - S[0, 0], S[0, 1] - S[1, 1]]) + 0.2
    assert terms[0] > 0 and bool((terms[1:] < 0).all())
    r = A.tangent_gradient_norms(img, txt, lambda S: L.triplet_hardest(S, 0.2))
    c = A.triplet_hn_tangent_norm(tp, tn_, phi, 0.2)
    torch.testing.assert_close(r.img, torch.stack([c.anchor, c.anchor.new_zeros(())]))
    torch.testing.assert_close(r.txt, torch.stack([c.positive, c.negative]))


def test_triplet_hn_hand_worked_2d():
    # phi = pi: t and t^ on opposite sides of v in one plane: the tangent part of t^ - t at v has
    # length sin(theta-) + sin(theta+); phi = 0: same side, |sin(theta-) - sin(theta+)|.
    c = A.triplet_hn_tangent_norm(0.5, 0.4, math.pi)
    assert float(c.anchor) == pytest.approx(math.sin(0.4) + math.sin(0.5))
    assert (float(c.negative), float(c.positive)) == pytest.approx((math.sin(0.4), math.sin(0.5)))
    c0 = A.triplet_hn_tangent_norm(0.5, 0.4, 0.0)
    assert float(c0.anchor) == pytest.approx(abs(math.sin(0.4) - math.sin(0.5)))
    # Inactive hinge: cos(1.4) - cos(0.2) + 0.2 < 0 -> no gradient anywhere.
    assert A.triplet_hn_tangent_norm(0.2, 1.4, 1.0) == (0.0, 0.0, 0.0)


def test_triplet_hn_broadcasts_over_grids():
    tp = torch.linspace(0.1, 1.0, 3, dtype=torch.float64)[:, None]
    tn = torch.linspace(0.1, 1.0, 4, dtype=torch.float64)[None, :]
    c = A.triplet_hn_tangent_norm(tp, tn, math.pi / 2)
    assert c.anchor.shape == (3, 4)
    one = A.triplet_hn_tangent_norm(float(tp[1]), float(tn[0, 2]), math.pi / 2)
    assert float(c.anchor[1, 2]) == pytest.approx(float(one.anchor))


@pytest.mark.parametrize("phi", [0.8, 2.0, math.pi])
def test_triplet_hn_vanishes_when_positive_and_negative_crowd_the_anchor(phi):
    """Li et al. sec. 3.3: with s+ = s- (theta+ = theta- = theta) the hinge is active (loss = m) but the
    anchor's tangent gradient is the tangent part of (t^ - t) at v. Since (t^ - t).v = cos - cos = 0
    it is all of t^ - t, whose length is sqrt(2 - 2 t.t^) with t.t^ = cos^2 + sin^2 cos(phi), i.e.
    2 sin(theta) |sin(phi/2)| -> 0 as theta -> 0; the negative's is sin(theta) -> 0 too."""
    previous = math.inf
    for theta in (0.3, 0.1, 0.01, 1e-3):
        v, t, tn = fig2_vectors(theta, theta, phi, seed=7)
        img, txt = torch.stack([v, -v]), torch.stack([t, tn])
        loss_fn = triplet_hn_anchor0(0.2)
        assert float(loss_fn(similarity(img, txt))) == pytest.approx(0.2)
        r = A.tangent_gradient_norms(img, txt, loss_fn)
        diff = tn - t
        tangent = diff - (diff @ v) * v  # derived: the projection of the raw gradient t^ - t
        torch.testing.assert_close(r.img_tangent[0], tangent)
        assert float(r.img_radial[0]) == pytest.approx(0.0, abs=1e-12)
        expected = 2 * math.sin(theta) * abs(math.sin(phi / 2))
        assert float(r.img[0]) == pytest.approx(expected, rel=1e-6)
        assert float(r.txt[1]) == pytest.approx(math.sin(theta), rel=1e-6)
        assert float(r.img[0]) < previous
        previous = float(r.img[0])
    assert previous < 2.1e-3


def test_negative_gradient_vanishes_as_it_reaches_the_anchor():
    """Eq. 12: |g(t^)| = sin(theta(v, t^)) -> 0 as v.t^ -> 1, while the anchor still receives ~ sin(theta+)."""
    for theta_neg in (0.1, 1e-2, 1e-4):
        c = A.triplet_hn_tangent_norm(0.6, theta_neg, 1.0)
        assert float(c.negative) == pytest.approx(math.sin(theta_neg))
    assert float(c.anchor) == pytest.approx(math.sin(0.6), rel=1e-3)


@pytest.mark.parametrize("theta_pos, theta_neg, phi", ANGLES)
@pytest.mark.parametrize("gamma", [1.0, 10.0, 60.0])
def test_unified_closed_form_matches_autograd(theta_pos, theta_neg, phi, gamma):
    v, t, tn = fig2_vectors(theta_pos, theta_neg, phi, seed=11)
    img, txt = torch.stack([v, -v]), torch.stack([t, tn])
    loss_fn = lambda S: F.softplus(gamma * (S[0, 1] - S[0, 0] + 0.2)) / gamma  # noqa: E731 Li eq. 13/5, one negative
    r = A.tangent_gradient_norms(img, txt, loss_fn)
    c = A.unified_tangent_norm(theta_pos, theta_neg, phi, margin=0.2, gamma=gamma)
    assert float(r.img[0]) == pytest.approx(float(c.anchor), rel=1e-9)
    assert float(r.txt[1]) == pytest.approx(float(c.negative), rel=1e-9)
    assert float(r.txt[0]) == pytest.approx(float(c.positive), rel=1e-9)


def test_unified_tends_to_triplet_hn_as_gamma_grows():
    """Li et al. eq. 6 on the tangent norms, away from the hinge's kink."""
    for theta_pos, theta_neg, phi in [(0.6, 0.5, 2.0), (0.2, 1.5, 1.0)]:
        hn = A.triplet_hn_tangent_norm(theta_pos, theta_neg, phi)
        un = A.unified_tangent_norm(theta_pos, theta_neg, phi, gamma=1e4)
        for a, b in zip(un, hn):
            assert float(a) == pytest.approx(float(b), abs=1e-9)


def test_tangent_bad_inputs():
    img, txt = raw_embeddings(n=3, d=4)
    fn = LOSS_FNS["triplet_hardest"]
    with pytest.raises(ValueError, match="^txt"):
        A.tangent_gradient_norms(img, txt[:, :3], fn)
    with pytest.raises(ValueError, match="^img"):
        A.tangent_gradient_norms(img[0], txt, fn)
    bad = txt.clone()
    bad[1, 1] = float("nan")
    with pytest.raises(ValueError, match="^txt"):
        A.tangent_gradient_norms(img, bad, fn)
    with pytest.raises(TypeError, match="^loss_fn"):
        A.tangent_gradient_norms(img, txt, "triplet")
    with pytest.raises(ValueError, match="^loss_fn"):
        A.tangent_gradient_norms(img, txt, lambda S: S.sum(dim=1))
    with pytest.raises(ValueError, match="^margin"):
        A.triplet_hn_tangent_norm(0.1, 0.2, 0.3, margin=-0.2)
    with pytest.raises(ValueError, match="^theta_pos"):
        A.triplet_hn_tangent_norm(float("nan"), 0.2, 0.3)
    with pytest.raises(ValueError, match="^phi"):
        A.triplet_hn_tangent_norm(0.1, 0.2, torch.tensor([float("inf")]))
    with pytest.raises(ValueError, match="^gamma"):
        A.unified_tangent_norm(0.1, 0.2, 0.3, gamma=0.0)


# --------------------------------------------------------------------------- COCOS marks


def jacobian_reference(S: torch.Tensor, loss: str, margin: float, temperature: float, tau: float, direction: str):
    """G[q, j] = d(query q's own term)/d s_qj by a Jacobian of the library loss -- an independent route to COCOS.

    Each per-pair value of the symmetric losses is image term q + caption term q; the image
    term touches only row q, so row q of J[q] (off the diagonal) is image query q's gradient.
    SmoothAP is row-wise, so S.T is its t2i loss.
    """
    per_pair = {
        "triplet": lambda X: L.triplet_all(X, margin, reduction="none"),
        "triplet_sh": lambda X: L.triplet_hardest(X, margin, reduction="none"),
        "nt_xent": lambda X: L.info_nce(X, temperature, reduction="none"),
        "smooth_ap": lambda X: L.smooth_ap(X, tau, reduction="none"),
    }[loss]
    S_dir = (S if direction == "i2t" else S.T).double().contiguous()
    J = jacobian(per_pair, S_dir, vectorize=True)
    idx = torch.arange(S_dir.shape[0])
    return J[idx, idx]


@pytest.mark.parametrize("loss", A.COCOS_LOSSES)
@pytest.mark.parametrize("direction", ["i2t", "t2i"])
@pytest.mark.parametrize("eps, margin, temperature, tau", [(0.01, 0.2, 0.1, 0.01), (1e-3, 0.0, 0.5, 0.1),
                                                           (0.2, 0.8, 0.1, 0.05)])
@pytest.mark.parametrize("make", [lambda: spread_S(7, seed=3), lambda: tied_S(7, seed=2)], ids=["spread", "tied"])
def test_cocos_mask_is_what_autograd_says(loss, direction, eps, margin, temperature, tau, make):
    """Marks = non-zero triplet gradients (eqs. 9a/9b), tau * gradient > eps (NT-Xent, eq. 11),
    |gradient| > eps (SmoothAP, eq. 13, one positive per query); row sums = C^q."""
    S = make()
    mask = A.cocos_mask(S, loss, A.CocosSettings(eps, margin, temperature, tau), direction)
    G = jacobian_reference(S, loss, margin, temperature, tau, direction)
    off = ~torch.eye(S.shape[0], dtype=torch.bool)
    expected = {"triplet": G != 0, "triplet_sh": G != 0, "nt_xent": G * temperature > eps}.get(loss, G.abs() > eps)
    assert torch.equal(mask, expected & off)
    c_q = A.cocos(S, loss, eps=eps, margin=margin, temperature=temperature, tau=tau)[direction]["C_q"]
    assert mask.sum(dim=1).tolist() == c_q.round().long().tolist()


def test_cocos_mask_with_several_positives_marks_any_anchor_term():
    S, mask = tied_S(3, 15, seed=1, mask=five_caption_mask()), five_caption_mask()
    marks = A.cocos_mask(S, "triplet", A.CocosSettings(margin=0.2), pos_mask=mask)
    expected = torch.zeros(3, 15, dtype=torch.bool)
    for i in range(3):
        for p in mask[i].nonzero().flatten().tolist():
            expected[i] |= ~mask[i] & (0.2 - S[i, p] + S[i] > 0)
    assert torch.equal(marks, expected)
    with pytest.raises(ValueError, match="direction"):
        A.cocos_mask(S, "triplet", direction="both", pos_mask=mask)


# --------------------------------------------------------------------------- dL/dS and weights


def test_loss_gradient_leaves_input_alone_and_matches_finite_differences():
    S = spread_S(5, seed=4)
    X = S.clone().requires_grad_()
    G = A.loss_gradient(X, lambda Y: (Y**2).sum())
    torch.testing.assert_close(G, 2 * S)
    assert X.grad is None and not G.requires_grad
    fn = lambda Y: L.unified(Y, 0.2, 10.0)  # noqa: E731
    G = A.loss_gradient(S, fn)
    h = 1e-6
    for i, j in [(0, 0), (1, 3), (4, 2)]:
        E = torch.zeros_like(S)
        E[i, j] = h
        assert float(G[i, j]) == pytest.approx(float((fn(S + E) - fn(S - E)) / (2 * h)), rel=1e-6, abs=1e-9)
    assert torch.equal(A.loss_gradient(S, lambda Y: Y.new_ones(()).requires_grad_()), torch.zeros_like(S))
    with pytest.raises(ValueError, match="scalar"):
        A.loss_gradient(S, lambda Y: Y)
    with pytest.raises(TypeError, match="loss_fn"):
        A.loss_gradient(S, "triplet")


def slow_softmax_weights(S: torch.Tensor, tau: float, pos: list[list[bool]]) -> torch.Tensor:
    """Bleeker eq. 11 with loops: for each positive pair, exp(s_n / tau) / Z over its query."""
    n_rows, n_cols = S.shape
    out = torch.zeros(n_rows, n_cols, dtype=torch.float64)
    for q in range(n_rows):
        negs = [n for n in range(n_cols) if not pos[q][n]]
        for i in [c for c in range(n_cols) if pos[q][c]]:
            Z = math.exp(float(S[q, i]) / tau) + sum(math.exp(float(S[q, n]) / tau) for n in negs)
            for n in negs:
                out[q, n] += math.exp(float(S[q, n]) / tau) / Z
    return out


@pytest.mark.parametrize("tau", [0.05, 0.1, 1.0])
@pytest.mark.parametrize("direction", ["i2t", "t2i"])
def test_softmax_weights_match_slow_reference(tau, direction):
    S = spread_S(8, seed=5)
    S_q = S if direction == "i2t" else S.T
    W = A.softmax_weights(S, tau, direction=direction)
    diag = [[i == j for j in range(8)] for i in range(8)]
    torch.testing.assert_close(W, slow_softmax_weights(S_q, tau, diag), rtol=1e-9, atol=1e-15)
    # one positive per query: the negatives' weights add up to 1 - p+ (eq. 11)
    p_pos = torch.softmax(S_q / tau, dim=1).diagonal()
    torch.testing.assert_close(W.sum(1), 1 - p_pos, rtol=1e-9, atol=1e-12)


def test_softmax_weights_with_five_captions_per_image():
    S, mask = spread_S(3, 15, seed=6), five_caption_mask()
    lists = lambda m: m.tolist()  # noqa: E731
    torch.testing.assert_close(A.softmax_weights(S, 0.2, pos_mask=mask), slow_softmax_weights(S, 0.2, lists(mask)))
    torch.testing.assert_close(A.softmax_weights(S, 0.2, pos_mask=mask, direction="t2i"),
                               slow_softmax_weights(S.T, 0.2, lists(mask.T)))


def slow_siglip_weights(S: torch.Tensor, t: float, b: float, pos: list[list[bool]]) -> torch.Tensor:
    """d/dl of -log sigmoid(z l) at l = t s + b, written out with math.exp: 1/(1 + e^{-l}) - [z = +1]."""
    out = torch.zeros(S.shape, dtype=torch.float64)
    for i in range(S.shape[0]):
        for j in range(S.shape[1]):
            out[i, j] = 1 / (1 + math.exp(-(t * float(S[i, j]) + b))) - (1.0 if pos[i][j] else 0.0)
    return out


@pytest.mark.parametrize("mask", [None, "repeated", "five"])
@pytest.mark.parametrize("logit_scale, logit_bias", [(math.log(10), -10.0), (math.log(5), 0.0), (math.log(100), -5.0)])
def test_siglip_weights_are_autograd_of_the_loss(logit_scale, logit_bias, mask):
    """(t/N) siglip_weights = dL/dS of losses.siglip(..., "mean"), and both equal the hand-derived loop."""
    S = spread_S(3, 15, seed=8) if mask == "five" else spread_S(6, seed=8)
    pm = {None: None, "repeated": repeated_image_mask(), "five": five_caption_mask()}[mask]
    W = A.siglip_weights(S, logit_scale, logit_bias, pos_mask=pm)
    grad = A.loss_gradient(S, lambda X: L.siglip(X, logit_scale, logit_bias, "mean", pos_mask=pm))
    torch.testing.assert_close(grad, math.exp(logit_scale) / S.shape[0] * W, rtol=1e-12, atol=1e-14)
    pos = torch.eye(6, dtype=torch.bool) if pm is None else pm
    torch.testing.assert_close(W, slow_siglip_weights(S, math.exp(logit_scale), logit_bias, pos.tolist()),
                               rtol=1e-12, atol=1e-14)
    # a negative is pushed down with a weight in [0, 1], a positive pulled up with one in [-1, 0]
    assert bool(((W[~pos] >= 0) & (W[~pos] <= 1)).all()) and bool(((W[pos] >= -1) & (W[pos] <= 0)).all())


def test_siglip_weight_of_a_negative_ignores_the_other_negatives():
    """Moving negative (0, 3) leaves the SigLIP weight of negative (0, 2) as it was; NT-Xent's changes (one Z(q))."""
    S = spread_S(6, seed=9)
    moved = S.clone()
    moved[0, 3] = S[0, 0]  # as close as the positive: a hard negative now
    sig, sig_moved = A.siglip_weights(S), A.siglip_weights(moved)
    others = torch.ones(6, 6, dtype=torch.bool)
    others[0, 3] = False
    assert float(sig[0, 2]) == float(sig_moved[0, 2])
    assert torch.equal(sig[others], sig_moved[others])  # no other weight moves, bit for bit
    assert float(sig[0, 3]) != float(sig_moved[0, 3])  # its own does
    soft, soft_moved = A.softmax_weights(S, 0.2), A.softmax_weights(moved, 0.2)
    assert float(soft_moved[0, 2]) < 0.99 * float(soft[0, 2])  # the harder negative takes a share of Z(q)


def test_siglip_weights_bad_arguments():
    S = spread_S(4, seed=10)
    with pytest.raises(ValueError, match="^logit_scale"):
        A.siglip_weights(S, 5.0)
    with pytest.raises(ValueError, match="^logit_bias"):
        A.siglip_weights(S, 1.0, math.nan)
    with pytest.raises(ValueError, match="^S contains NaN"):
        A.siglip_weights(S.masked_fill(torch.eye(4, dtype=torch.bool), math.inf))


@pytest.mark.parametrize("w, expected", [([1, 1, 1, 1], 4.0), ([0, 0, 5, 0], 1.0), ([0.5, 0.5], 2.0), ([0, 0], 0.0)])
def test_effective_number_hand_values(w, expected):
    assert A.effective_number(w) == pytest.approx(expected)
    assert A.effective_number(torch.tensor(w, dtype=torch.float32)) == pytest.approx(expected)


def test_effective_number_is_the_perplexity():
    w = [0.7, 0.2, 0.1]
    assert A.effective_number(w) == pytest.approx(math.exp(-sum(p * math.log(p) for p in w)))
    for bad in ([0.5, -0.1], [], [math.nan]):
        with pytest.raises(ValueError, match="weights"):
            A.effective_number(bad)


def two_pair_batch(x: float) -> torch.Tensor:
    """A symmetric 2x2 batch: each of its four queries has one negative, at gap x."""
    return torch.tensor([[0.0, x], [x, 0.0]], dtype=torch.float64)


@pytest.mark.parametrize("margin", [0.0, 0.2, 0.5])
@pytest.mark.parametrize("gamma", [1.0, 10.0, 60.0, 1e4])
@pytest.mark.parametrize("x", [-0.9, -0.2, -0.05, 0.0, 0.3])
def test_unified_one_negative_curves_are_the_library_loss(margin, gamma, x):
    S = two_pair_batch(x)
    loss = float(L.unified(S, margin, gamma, reduction="sum"))
    grad = A.loss_gradient(S, lambda X: L.unified(X, margin, gamma, reduction="sum"))
    assert float(A.unified_one_negative_loss(x, margin, gamma)) == pytest.approx(loss / 4, rel=1e-9, abs=1e-12)
    # dL/ds_01 collects row 0's and column 1's term: twice the weight of one query
    assert float(A.unified_one_negative_weight(x, margin, gamma)) == pytest.approx(float(grad[0, 1]) / 2, rel=1e-9,
                                                                                  abs=1e-12)


def test_unified_one_negative_weight_is_the_derivative_and_stays_finite():
    x = torch.linspace(-1, 0.6, 2001, dtype=torch.float64)
    for margin, gamma in [(0.0, 2.0), (0.2, 20.0)]:
        loss = A.unified_one_negative_loss(x, margin, gamma)
        numeric = (loss[2:] - loss[:-2]) / (x[2:] - x[:-2])
        torch.testing.assert_close(A.unified_one_negative_weight(x, margin, gamma)[1:-1], numeric, atol=1e-4, rtol=0)
    ends = torch.tensor([-1.0, 0.0, 1.0])
    assert torch.isfinite(A.unified_one_negative_loss(ends, 0.2, 1e6)).all()
    assert A.unified_one_negative_weight(ends, 0.2, 1e6).tolist() == [0.0, 1.0, 1.0]
    assert float(A.unified_one_negative_weight(-0.2, 0.2, 60.0)) == 0.5  # centred at -m for every gamma
    with pytest.raises(ValueError, match="x"):
        A.unified_one_negative_loss([0.0, math.nan], 0.2, 1.0)
    with pytest.raises(ValueError, match="gamma"):
        A.unified_one_negative_weight(0.0, 0.2, 0.0)


def slow_unified_weights(S: torch.Tensor, m: float, g: float, pos: list[list[bool]]) -> torch.Tensor:
    """Li eqs. 14-16 (gamma written out) with loops: D_in / (1 + sum_k D_ik) per positive pair of row i."""
    out = torch.zeros(S.shape, dtype=torch.float64)
    for i in range(S.shape[0]):
        for p in [c for c in range(S.shape[1]) if pos[i][c]]:
            D = {n: math.exp(g * (float(S[i, n]) - float(S[i, p]) + m)) for n in range(S.shape[1]) if not pos[i][n]}
            for n, d in D.items():
                out[i, n] += d / (1 + sum(D.values()))
    return out


@pytest.mark.parametrize("margin", [0.0, 0.2, 0.5])
@pytest.mark.parametrize("gamma", [1.0, 10.0, 60.0])
def test_unified_weights_match_loops_and_add_up_to_autograd(margin, gamma):
    S = spread_S(8, seed=7)
    diag = [[i == j for j in range(8)] for i in range(8)]
    W = A.unified_weights(S, margin, gamma)
    torch.testing.assert_close(W, slow_unified_weights(S, margin, gamma, diag), rtol=1e-9, atol=1e-14)
    # both halves together are the gradient of the whole loss at every negative
    grad = A.loss_gradient(S, lambda X: L.unified(X, margin, gamma, reduction="sum"))
    off = ~torch.eye(8, dtype=torch.bool)
    torch.testing.assert_close((W + A.unified_weights(S.T, margin, gamma).T)[off], grad[off])


def test_unified_weights_with_five_captions_per_image():
    S, mask = spread_S(3, 15, seed=8), five_caption_mask()
    torch.testing.assert_close(A.unified_weights(S, 0.2, 10.0, mask),
                               slow_unified_weights(S, 0.2, 10.0, mask.tolist()), rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("margin", [0.0, 0.2, 0.5])
def test_unified_limit_gap_and_bound_from_the_paper(margin):
    """Li et al. eq. 6 with a rate: 0 <= unified - triplet_hardest <= 2 P log N / gamma, the gap from loops."""
    S = spread_S(6, seed=3)
    diag = [[i == j for j in range(6)] for i in range(6)]
    r = A.unified_limit(S, margin, [100.0, 1.0, 10.0])
    assert list(r.gammas) == [1.0, 10.0, 100.0]
    hn = float(refs.triplet_hardest(S, margin, diag))
    want = [float(refs.unified(S, margin, g, diag)) - hn for g in r.gammas]
    np.testing.assert_allclose(r.gap, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(r.bound, 2 * 6 * math.log(6) / r.gammas)
    assert (r.gap >= -r.resolution).all() and (r.gap <= r.bound).all() and r.gap[-1] < r.gap[0]
    assert 0 < r.resolution < 1e-12  # a few ulps of a loss of order 1
    for kwargs, arg in [(dict(margin=-0.1), "margin"), (dict(gammas=[1.0, 0.0]), "gammas")]:
        with pytest.raises(ValueError, match=arg):
            A.unified_limit(S, **{"margin": 0.2, "gammas": [1.0], **kwargs})
    with pytest.raises(ValueError, match="S"):
        A.unified_limit(S[:, :3], 0.2, [1.0])


def slow_partition(S: torch.Tensor, q: int, loss: str, topk) -> list[tuple[int, int]]:
    """Entries of the negatives in query q's partition function, from Veit & Wilber eqs. 1-6."""
    n = S.shape[0]
    cells = [(q, j) for j in range(n) if j != q] if loss == "sampled_softmax" else \
        [(i, j) for i in range(n) for j in range(n) if i != j]
    if topk is None:
        return cells
    k = topk if isinstance(topk, int) else math.ceil(round(topk * len(cells), 9))
    return sorted(cells, key=lambda c: float(S[c]), reverse=True)[:k]


@pytest.mark.parametrize("loss, topk", [("sampled_softmax", None), ("sampled_softmax", 3), ("sampled_softmax", 0.5),
                                        ("cross_example_softmax", None), ("cross_example_softmax", 0.3),
                                        ("cross_example_softmax", 7)])
@pytest.mark.parametrize("q, lam", [(0, 20.0), (5, 5.0), (7, 1.0)])
def test_partition_weights_match_slow_reference(loss, topk, q, lam):
    S = spread_S(8, seed=9).clamp(-1, 1)
    cells = slow_partition(S, q, loss, topk)
    z = math.exp(lam * float(S[q, q])) + sum(math.exp(lam * float(S[c])) for c in cells)
    expected = torch.zeros(8, 8, dtype=torch.float64)
    for c in cells:
        expected[c] = math.exp(lam * float(S[c])) / z
    expected[q, q] = math.exp(lam * float(S[q, q])) / z
    W = A.partition_weights(S, q, loss, topk, lam)
    torch.testing.assert_close(W, expected, rtol=1e-9, atol=1e-12)
    term = getattr(L, loss)(S, lam, topk=topk, reduction="none")[q]
    torch.testing.assert_close(-torch.log(W[q, q]), term)  # l_q = -log p+
    with pytest.raises(ValueError, match="query"):
        A.partition_weights(S, 8, loss, topk, lam)


def test_partition_weights_bad_input():
    S = spread_S(4, seed=1)
    with pytest.raises(ValueError, match="loss"):
        A.partition_weights(S, 0, "info_nce")
    with pytest.raises(ValueError, match="scale"):
        A.partition_weights(S, 0, scale=0.0)
    with pytest.raises(ValueError, match="topk"):
        A.partition_weights(S, 0, topk=4)
    with pytest.raises(ValueError, match="S"):
        A.partition_weights(S[:, :3], 0)


# --------------------------------------------------------------------------- Li et al. Fig. 2: descent


ANGLES = [0.0, 0.1, 0.7, math.pi / 2, 2.5, math.pi]


@pytest.mark.parametrize("phi", [0.0, math.pi, 1.0])
@pytest.mark.parametrize("margin", [0.0, 0.2, 1.0])
def test_triplet_hn_descent_points_and_tangent_steps(phi, margin):
    tp, tn = torch.meshgrid(torch.tensor(ANGLES, dtype=torch.float64), torch.tensor(ANGLES, dtype=torch.float64),
                            indexing="ij")
    r = A.triplet_hn_descent(tp, tn, phi, margin)
    norms = A.triplet_hn_tangent_norm(tp, tn, phi, margin=margin)
    for point in (r.anchor, r.positive, r.negative):
        torch.testing.assert_close(point.norm(dim=-1), torch.ones_like(tp))
    torch.testing.assert_close((r.anchor * r.positive).sum(-1), torch.cos(tp))
    torch.testing.assert_close((r.anchor * r.negative).sum(-1), torch.cos(tn))
    for point, step, name in ((r.anchor, r.anchor_step, "anchor"), (r.positive, r.positive_step, "positive"),
                              (r.negative, r.negative_step, "negative")):
        assert float((point * step).sum(-1).abs().max()) < 1e-12  # tangent at its point
        torch.testing.assert_close(step.norm(dim=-1), norms[name], atol=1e-12, rtol=0)  # eqs. 11-12


def test_triplet_hn_descent_steps_decrease_the_loss():
    """A small step along each descent direction lowers the hinge of Li et al. eq. 8 (first order)."""
    m, h = 0.2, 1e-4
    for tp, tn, phi in [(0.3, 0.2, 0.0), (1.0, 0.9, math.pi), (2.0, 1.8, 0.0), (1.0, 0.2, 2.0)]:
        r = A.triplet_hn_descent(tp, tn, phi, m)

        def loss(v, t, t_hat):
            return float((v * t_hat).sum() - (v * t).sum() + m)

        base = loss(r.anchor, r.positive, r.negative)
        assert base > 0
        moved = {k: (p + h * s) / (p + h * s).norm() for k, p, s in (
            ("anchor", r.anchor, r.anchor_step), ("positive", r.positive, r.positive_step),
            ("negative", r.negative, r.negative_step))}
        assert loss(moved["anchor"], r.positive, r.negative) < base
        assert loss(r.anchor, moved["positive"], r.negative) < base
        assert loss(r.anchor, r.positive, moved["negative"]) < base


def test_softmax_weights_are_the_info_nce_gradient():
    """Off the diagonal, dL/dS of info_nce is (row weights + column weights) / tau (eq. 11 in both directions)."""
    S = spread_S(8, seed=11)
    G = A.loss_gradient(S, lambda X: L.info_nce(X, 0.1, "sum"))
    W = A.softmax_weights(S, 0.1) + A.softmax_weights(S, 0.1, direction="t2i").T
    off = ~torch.eye(8, dtype=torch.bool)
    torch.testing.assert_close(G[off], W[off] / 0.1)
    with pytest.raises(ValueError, match="direction"):
        A.softmax_weights(S, 0.1, direction="both")
    with pytest.raises(ValueError, match="temperature"):
        A.softmax_weights(S, 0.0)


def test_hand_worked_partition():
    """Three pairs: query 0 has negatives 0.5 (its row) and the batch adds 0.9 from row 2."""
    S = torch.tensor([[0.8, 0.5, 0.1], [0.0, 0.7, 0.2], [0.3, 0.9, 0.6]], dtype=torch.float64)

    def term(loss, topk):
        return float(-torch.log(A.partition_weights(S, 0, loss, topk, scale=1.0)[0, 0]))

    assert term("sampled_softmax", None) == pytest.approx(math.log(math.exp(0.8) + math.exp(0.5) + math.exp(0.1)) - 0.8)
    assert term("sampled_softmax", 1) == pytest.approx(math.log(math.exp(0.8) + math.exp(0.5)) - 0.8)  # only 0.5
    negs = [0.5, 0.1, 0.0, 0.2, 0.3, 0.9]
    assert term("cross_example_softmax", None) == pytest.approx(math.log(math.exp(0.8) + sum(map(math.exp, negs)))
                                                                - 0.8)
    top_half = math.log(math.exp(0.8) + math.exp(0.9) + math.exp(0.5) + math.exp(0.3)) - 0.8  # 3 of 6
    assert term("cross_example_softmax", 0.5) == pytest.approx(top_half)
    W = A.partition_weights(S, 0, "cross_example_softmax", 0.5, scale=1.0)
    assert W[2, 1] > 0 and W[1, 0] == 0 and W[0, 2] == 0  # 0.9 mined from another row; 0.0 and 0.1 left out
    for q in range(3):
        assert torch.all(A.partition_weights(S, q)[torch.arange(3) != q] == 0)  # sampled softmax: its row only
        assert int((A.partition_weights(S, q, "cross_example_softmax") > 0).sum()) == 3 * 2 + 1


# --------------------------------------------------------------------------- COCOS marks against the paper


def demo_S(n: int = 8) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    img = torch.randn(n, 16, generator=g, dtype=torch.float64)
    return similarity(img, img + 1.5 * torch.randn(n, 16, generator=g, dtype=torch.float64))


def _sigmoid(x: float) -> float:
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
            g = {j: _sigmoid((row[j] - s_pos) / tau) for j in negs}
            rank = 1 + sum(g.values())
            flags = {j: g[j] * (1 - g[j]) / tau / rank**2 > eps for j in negs}
        out.append([flags.get(j, False) for j in range(n)])
    return out


MASK_GRID = list(itertools.product(["triplet", "triplet_sh", "nt_xent", "smooth_ap"], [1e-3, 0.01, 0.2],
                              [0.0, 0.2, 0.8], ["i2t", "t2i"]))


@pytest.mark.parametrize("loss, eps, margin, direction", MASK_GRID)
def test_cocos_mask_matches_the_paper(loss, eps, margin, direction):
    S = demo_S()
    for temperature, tau in ((0.1, 0.01), (0.5, 0.1)):
        mask = A.cocos_mask(S, loss, A.CocosSettings(eps, margin, temperature, tau), direction)
        assert mask.tolist() == slow_contributions(S, loss, eps, margin, temperature, tau, direction)
        counts = A.cocos(S, loss, eps=eps, margin=margin, temperature=temperature, tau=tau)[direction]["C_q"]
        assert mask.sum(dim=1).tolist() == counts.round().long().tolist()


def test_cocos_mask_hand_worked_batch():
    """Two queries; image 0 violates with caption 1 (0.5 vs 0.6 + margin), image 1 does not."""
    S = torch.tensor([[0.6, 0.5], [-0.5, 0.9]], dtype=torch.float64)
    assert A.cocos_mask(S, "triplet", A.CocosSettings(margin=0.2)).tolist() == [[False, True], [False, False]]
    # captions as queries: caption 0 (0.6 vs -0.5) is fine, caption 1 (0.9 vs 0.5) is fine at margin 0.2
    assert A.cocos_mask(S, "triplet", A.CocosSettings(margin=0.2), "t2i").tolist() == [[False, False], [False, False]]
    assert A.cocos_mask(S, "triplet", A.CocosSettings(margin=0.5), "t2i").tolist() == [[False, False], [True, False]]


def test_cocos_settings_are_checked_once():
    assert A.CocosSettings(eps=1, margin=0).eps == 1.0 and isinstance(A.CocosSettings(eps=1).eps, float)
    for kw, name in [({"eps": 0.0}, "eps"), ({"margin": -0.1}, "margin"), ({"temperature": 0}, "temperature"),
                     ({"tau": -1.0}, "tau")]:
        with pytest.raises(ValueError, match=f"^{name}"):
            A.CocosSettings(**kw)
    S = spread_S(5, seed=2)
    with pytest.raises(TypeError, match="^settings"):
        A.cocos_mask(S, "triplet", {"margin": 0.2})
    for loss in A.COCOS_LOSSES:  # cocos's keywords and the object say the same
        kw = dict(eps=0.05, margin=0.3, temperature=0.2, tau=0.05)
        marks = A.cocos_mask(S, loss, A.CocosSettings(**kw), "t2i")
        assert marks.sum(dim=1).tolist() == A.cocos(S, loss, **kw)["t2i"]["C_q"].round().long().tolist()


@pytest.mark.parametrize("n", [2, 5])
def test_cocos_on_a_constant_matrix(n):
    """A collapsed model (every score tied): the counts follow the losses' own gradients, no NaN."""
    S = torch.full((n, n), 0.3, dtype=torch.float64)
    for d in ("i2t", "t2i"):
        # margin > 0: every triplet violates, so all negatives count (Triplet) or exactly one (Triplet-SH)
        assert A.cocos(S, "triplet", margin=0.2)[d]["C_q"].tolist() == [n - 1] * n
        assert A.cocos(S, "triplet_sh", margin=0.2)[d]["C_q"].tolist() == [1] * n
        # margin 0: a tie sits on the hinge, where the loss's gradient is 0 -- nothing counts
        assert A.cocos(S, "triplet", margin=0.0)[d]["C_0"] == n
        nt = A.cocos(S, "nt_xent", eps=0.5 / n, temperature=0.1)[d]  # every weight is 1/n, above eps
        assert nt["C_q"].tolist() == [n - 1] * n and math.isclose(nt["W_pos"], 1 - 1 / n)
        ap = A.cocos(S, "smooth_ap", tau=0.01)[d]
        assert all(math.isfinite(float(v)) for v in ap["C_q"])
    for margin in (0.0, 0.2):  # the same on the gradients themselves
        grad = A.loss_gradient(S, lambda X: L.triplet_all(X, margin))
        assert int((grad[~torch.eye(n, dtype=torch.bool)] != 0).sum()) == (0 if margin == 0 else n * (n - 1))


@pytest.mark.parametrize("direction", ["i2t", "t2i"])
def test_temperature_sweep_matches_a_softmax_loop(direction):
    """Each query's weights by hand (eq. 11, float64 loop over candidates): its negatives' perplexity and the share
    of the heaviest, and the mean perplexity over the queries."""
    S = torch.randn(5, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float64).tanh()
    taus = [0.5, 0.05, 2.0]
    sweep = A.temperature_sweep(S, taus, query=2, direction=direction)
    S_q = S if direction == "i2t" else S.T
    assert list(sweep.temperatures) == sorted(taus)
    for k, t in enumerate(sorted(taus)):
        perplexities, shares = [], []
        for q in range(5):
            e = [math.exp(float(S_q[q, n]) / t) for n in range(5)]
            w = [e[n] / sum(e) for n in range(5) if n != q]
            p = [v / sum(w) for v in w]
            perplexities.append(math.exp(-sum(v * math.log(v) for v in p)))
            shares.append(max(p))
        assert sweep.query_effective_number[k] == pytest.approx(perplexities[2], rel=1e-9)
        assert sweep.hardest_share[k] == pytest.approx(shares[2], rel=1e-9)
        assert sweep.mean_effective_number[k] == pytest.approx(sum(perplexities) / 5, rel=1e-9)


def test_temperature_sweep_names_its_bad_arguments():
    S = torch.eye(4, dtype=torch.float64)
    for kwargs, name in (({"temperatures": [0.1]}, "temperatures"), ({"temperatures": [0.1, -1.0]}, "temperatures"),
                         ({"temperatures": [0.1, 1.0], "query": 4}, "query")):
        with pytest.raises(ValueError, match=name):
            A.temperature_sweep(S, **kwargs)
