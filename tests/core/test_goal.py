"""vlr_lib.goal (Xuan & Chen, GOAL) against slow loop references written from the paper.

The references below are plain Python loops over floats (float64 throughout) and
share no code with vlr_lib.goal. Where the paper leaves a choice open they encode
the reading documented in vlr_lib/goal.py: Heaviside(0) = 0, pair weights clamped
at 0 ([.]_+ as in Circle loss), MS sets per anchor as in MS loss: P = the query's other
positives below s_neg + eps, N = the query's other negatives above its lowest positive - eps,
and an empty set gives the neutral m (1 for sig-ms, 0 for lin-ms). The sig-ms term m is
MS loss's own sum over the set and the selected pair (Wang et al. 2019; ms_form="ms-loss",
the default) or eq. 12's mean over the set (ms_form="printed").
"""
from __future__ import annotations

import dataclasses
import inspect
import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from vlr_lib import goal as G
from vlr_lib import losses

COMBOS = list(itertools.product(G.GOAL_TRIPLETS, G.GOAL_PAIRS))
PARAMS = dict(margin=0.2, tau=10.0, alpha=2.0, beta=10.0, lam=0.5, eps=0.1, ms_form="ms-loss")


# --------------------------------------------------------------------------- batches


def random_S(n: int = 6, m: int | None = None, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, m or n, generator=g, dtype=torch.float64) * 2 - 1).requires_grad_()


def repeated_image_mask() -> torch.Tensor:
    """6 image-caption pairs where image 2 appears twice (rows 2 and 4): 2 x 2 positives."""
    ids = torch.tensor([0, 1, 2, 3, 2, 5])
    return ids[:, None] == ids[None, :]


def two_caption_mask() -> torch.Tensor:
    """3 images x 6 captions, caption c describes image c // 2 (non-square S)."""
    return torch.arange(3)[:, None] == (torch.arange(6) // 2)[None, :]


MASKS = {"diagonal": None, "repeated_image": repeated_image_mask(), "two_captions": two_caption_mask()}


def batch(mask_name: str, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor | None]:
    mask = MASKS[mask_name]
    shape = (6, 6) if mask is None else tuple(mask.shape)
    return random_S(*shape, seed=seed), mask


# --------------------------------------------------------------------------- slow references


def ref_T(name: str, sp: float, sn: float, margin: float, tau: float) -> float:
    """Eqs. 5, 7, 8 as printed."""
    if name == "con":
        return 1.0 if margin + sn - sp > 0 else 0.0
    if name == "nca":
        return 1.0 / (1.0 + math.exp(tau * (sp - sn)))
    return 1.0 / (1.0 + math.exp(tau * (sp * (2 - sp) - sn * sn)))


def ref_P(name: str, s: float, positive: bool, alpha: float, beta: float, lam: float, rel=None) -> float:
    """Eqs. 9-13 as printed, with the [.]_+ clamps."""
    if name == "con":
        return 1.0
    lin = max(1.0 - s, 0.0) if positive else max(s, 0.0)
    if name == "lin":
        return lin
    if name == "lin-ms":
        return max(1.0 - rel, 0.0) * lin if positive else max(1.0 + rel, 0.0) * lin
    expo = math.exp(alpha * (s - lam)) if positive else math.exp(-beta * (s - lam))
    return 1.0 / ((1.0 if name == "sig" else rel) + expo)


def _mean(values: list[float], empty: float) -> float:
    return sum(values) / len(values) if values else empty


def ref_m_sig(terms: list[float], ms_form: str) -> float:
    """MS loss's denominator sums over the set *and* the selected pair (e^0 = 1); eq. 12 prints a mean."""
    return 1.0 + sum(terms) if ms_form == "ms-loss" else _mean(terms, 1.0)


def ref_goal(S: torch.Tensor, mask: torch.Tensor | None, triplet: str, pair: str, p=PARAMS, stats=None):
    """Designed dL/dS by loops: every positive pair, both directions, its hardest negative."""
    s = S.detach().tolist()
    n_r, n_c = len(s), len(s[0])
    pos = [[(i == j) if mask is None else bool(mask[i, j]) for j in range(n_c)] for i in range(n_r)]
    pairs = [(i, j) for i in range(n_r) for j in range(n_c) if pos[i][j]]
    grad = [[0.0] * n_c for _ in range(n_r)]
    for image_query in (True, False):
        for i, j in pairs:
            cands = [(i, c) for c in range(n_c)] if image_query else [(r, j) for r in range(n_r)]
            negs = [(a, b) for a, b in cands if not pos[a][b]]
            own = [(a, b) for a, b in cands if pos[a][b]]  # the anchor's positives (MS sets are per anchor)
            min_pos = min(s[a][b] for a, b in own)
            hard = negs[0]
            for a, b in negs[1:]:
                if s[a][b] > s[hard[0]][hard[1]]:
                    hard = (a, b)
            sp, sn = s[i][j], s[hard[0]][hard[1]]
            rel_p = rel_n = None
            if pair in ("lin-ms", "sig-ms"):
                set_p = [s[k][l] for k, l in own if (k, l) != (i, j) and s[k][l] < sn + p["eps"]]
                set_n = [s[a][b] for a, b in negs if (a, b) != hard and s[a][b] > min_pos - p["eps"]]
                if stats is not None:
                    stats.append((len(set_p), len(set_n)))
                if pair == "sig-ms":
                    rel_p = ref_m_sig([math.exp(p["alpha"] * (sp - r)) for r in set_p], p["ms_form"])
                    rel_n = ref_m_sig([math.exp(-p["beta"] * (sn - r)) for r in set_n], p["ms_form"])
                else:
                    rel_p = _mean([sp - r for r in set_p], 0.0)
                    rel_n = _mean([sn - r for r in set_n], 0.0)
            t = ref_T(triplet, sp, sn, p["margin"], p["tau"])
            grad[i][j] -= t * ref_P(pair, sp, True, p["alpha"], p["beta"], p["lam"], rel_p)
            grad[hard[0]][hard[1]] += t * ref_P(pair, sn, False, p["alpha"], p["beta"], p["lam"], rel_n)
    return torch.tensor(grad, dtype=torch.float64)


def hardest_triplets(S: torch.Tensor, mask: torch.Tensor | None):
    """(i, j, hardest-negative index) lists per direction, by loops."""
    s = S.detach()
    pos = torch.eye(*s.shape, dtype=torch.bool) if mask is None else mask
    out = []
    for i, j in pos.nonzero().tolist():
        row = [c for c in range(s.shape[1]) if not pos[i, c]]
        col = [r for r in range(s.shape[0]) if not pos[r, j]]
        out.append((i, j, max(row, key=lambda c: s[i, c]), max(col, key=lambda r: s[r, j])))
    return out


def goal_backward(S: torch.Tensor, triplet: str, pair: str, mask=None, **kw) -> torch.Tensor:
    S = S.detach().clone().requires_grad_()
    G.goal_objective(S, triplet, pair, pos_mask=mask, **{**PARAMS, **kw}).backward()
    return S.grad


# --------------------------------------------------------------------------- names and Table 1


def test_table1_maps_the_five_known_losses():
    assert set(G.TABLE1) == set(COMBOS) and len(COMBOS) == 15
    assert G.TABLE1[("con", "con")] == "Triplet"
    assert G.TABLE1[("nca", "con")] == "hard-negative NCA"  # Table 1 says "NT-Xent"; eq. 6 mines one negative
    assert G.TABLE1[("cir", "lin")] == "Circle"
    assert G.TABLE1[("con", "sig")] == "Binomial deviance"
    assert G.TABLE1[("con", "sig-ms")] == "MS"
    assert sum(v == "New" for v in G.TABLE1.values()) == 10


def test_parse_goal_name():
    assert G.parse_goal_name("goal:cir,sig-ms") == ("cir", "sig-ms")
    assert G.parse_goal_name("goal:con, lin") == ("con", "lin")
    with pytest.raises(ValueError, match="^triplet"):
        G.parse_goal_name("goal:foo,sig")
    with pytest.raises(ValueError, match="^pair"):
        G.parse_goal_name("goal:cir,sig_ms")
    for bad in ("cir,sig", "goal:cir", "goal:cir,sig,con", "triplet:con,con"):
        with pytest.raises(ValueError, match="^name"):
            G.parse_goal_name(bad)
    with pytest.raises(TypeError, match="^name"):
        G.parse_goal_name(3)


# --------------------------------------------------------------------------- triplet and pair weights


GRID = torch.linspace(-1, 1, 17, dtype=torch.float64)


@pytest.mark.parametrize("name", G.GOAL_TRIPLETS)
@pytest.mark.parametrize("margin,tau", [(0.2, 10.0), (0.0, 1.0), (0.5, 30.0)])
def test_triplet_weight_matches_reference(name, margin, tau):
    sp, sn = GRID[:, None], GRID[None, :]  # broadcasting to a 17 x 17 triplet diagram (Fig. 2)
    got = G.triplet_weight(name, sp, sn, margin=margin, tau=tau)
    rows = [[ref_T(name, a, b, margin, tau) for b in GRID.tolist()] for a in GRID.tolist()]
    want = torch.tensor(rows, dtype=torch.float64)
    assert got.shape == (17, 17) and got.dtype == torch.float64
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-15)


def test_triplet_weight_hand_values():
    # Heaviside is 0 on the hinge itself, 1 just inside it.
    assert float(G.triplet_weight("con", 0.7, 0.5, margin=0.2)) == 0.0
    assert float(G.triplet_weight("con", 0.7, 0.51, margin=0.2)) == 1.0
    assert float(G.triplet_weight("nca", 0.3, 0.3)) == pytest.approx(0.5)
    # T^cir at the ideal triplet (s_pos = 1, s_neg = 0) is 1 / (1 + e^tau); on its level circle
    # (s_pos - 1)^2 + s_neg^2 = 0.5^2 every point has the same weight.
    assert float(G.triplet_weight("cir", 1.0, 0.0, tau=10.0)) == pytest.approx(1 / (1 + math.e**10))
    angles = torch.linspace(0.1, 1.4, 5, dtype=torch.float64)
    on_circle = G.triplet_weight("cir", 1 - 0.5 * torch.sin(angles), 0.5 * torch.cos(angles))
    torch.testing.assert_close(on_circle, on_circle[:1].expand(5))
    # Stable far outside the cosine range: no NaN, no overflow.
    big = G.triplet_weight("nca", torch.tensor([-50.0, 50.0]), torch.tensor([50.0, -50.0]), tau=100.0)
    assert torch.equal(big, torch.tensor([1.0, 0.0]))


MS_RELS = {"lin-ms": [-0.5, 0.0, 0.1, 0.7, 1.5], "sig-ms": [0.05, 0.1, 1.0, 3.0]}


@pytest.mark.parametrize("name", G.GOAL_PAIRS)
@pytest.mark.parametrize("positive", [True, False])
@pytest.mark.parametrize("alpha,beta,lam", [(2.0, 10.0, 0.5), (1.0, 4.0, 0.0)])
def test_pair_weight_matches_reference(name, positive, alpha, beta, lam):
    for rel in MS_RELS.get(name, [None]):
        got = G.pair_weight(name, GRID, positive, alpha=alpha, beta=beta, lam=lam, rel=rel)
        values = [ref_P(name, s, positive, alpha, beta, lam, rel) for s in GRID.tolist()]
        want = torch.tensor(values, dtype=torch.float64)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-15)
        assert bool((got >= 0).all())


def test_pair_weight_rel_tensor_broadcasts():
    rel = torch.tensor([[0.1], [1.0], [2.0]], dtype=torch.float64)
    got = G.pair_weight("sig-ms", GRID, False, rel=rel)
    rows = [[ref_P("sig-ms", s, False, 2.0, 10.0, 0.5, r) for s in GRID.tolist()] for r in (0.1, 1.0, 2.0)]
    want = torch.tensor(rows, dtype=torch.float64)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("triplet, pair", COMBOS)
def test_config_weights_are_the_designed_gradient_of_each_triplet(triplet, pair):
    """GoalConfig.weights = (T P_+, T P_-) of the slow references at every (s_pos, s_neg) of a Fig. 2 grid."""
    cfg = G.GoalConfig(triplet, pair, margin=0.3, tau=5.0, alpha=1.5, beta=20.0, lam=0.4)
    rel = MS_RELS[pair][1] if pair in MS_RELS else None  # non-MS pair weights ignore the figure's m
    sp, sn = GRID[:, None].expand(17, 17), GRID[None, :].expand(17, 17)
    pull, push = cfg.weights(sp, sn, 0.1 if rel is None else rel)
    grid = GRID.tolist()
    T = torch.tensor([[ref_T(triplet, a, b, 0.3, 5.0) for b in grid] for a in grid], dtype=torch.float64)
    P = {positive: torch.tensor([ref_P(pair, s, positive, 1.5, 20.0, 0.4, rel) for s in grid], dtype=torch.float64)
         for positive in (True, False)}
    torch.testing.assert_close(pull, T * P[True][:, None], rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(push, T * P[False][None, :], rtol=1e-12, atol=1e-15)


def test_table1_values_lay_out_the_15_combinations_and_name_bad_keys():
    values = {(t, p): 10.0 * i + j for i, p in enumerate(G.GOAL_PAIRS) for j, t in enumerate(G.GOAL_TRIPLETS)}
    z = G.table1_values(values)
    assert z.shape == (5, 3) and z[2, 1] == 21.0  # row: pair "sig", column: triplet "nca"
    with pytest.raises(ValueError, match=r"missing \[\('con', 'con'\)\]"):
        G.table1_values({k: v for k, v in values.items() if k != ("con", "con")})
    with pytest.raises(ValueError, match="unknown"):
        G.table1_values({**values, ("con", "bad"): 1.0})
    with pytest.raises(ValueError, match="finite"):
        G.table1_values({**values, ("con", "con"): float("nan")})


@pytest.mark.parametrize("positive", [True, False])
def test_ms_weights_simplify_to_eq_10_and_11(positive):
    """Paper, sec. 3.3: "when m+sig = m-sig = 1 the pair weights simplify back to ... eq. 11"."""
    s = torch.linspace(-1, 1, 41, dtype=torch.float64)
    torch.testing.assert_close(G.pair_weight("sig-ms", s, positive, rel=1.0), G.pair_weight("sig", s, positive))
    torch.testing.assert_close(G.pair_weight("lin-ms", s, positive, rel=0.0), G.pair_weight("lin", s, positive))
    # m < 1 raises the ceiling of the sigmoid weight from 1 to 1/m (Fig. 3, right).
    low_m = G.pair_weight("sig-ms", s, positive, rel=0.1)
    assert bool((low_m > G.pair_weight("sig", s, positive)).all())
    assert bool((low_m < 10.0).all())
    far = torch.tensor([-3.0 if positive else 3.0], dtype=torch.float64)  # deep in the tail: ~1/m
    assert float(G.pair_weight("sig-ms", far, positive, rel=0.1)) == pytest.approx(10.0, rel=0.01)


def test_relative_term_hand_example():
    s = torch.tensor([0.5, 0.3], dtype=torch.float64)
    others = torch.tensor([[0.2, 0.4, 0.9], [0.1, 0.2, 0.3]], dtype=torch.float64)
    members = torch.tensor([[True, True, False], [False, False, False]])
    m_sig = G.relative_term("sig-ms", s, others, members, positive=True, alpha=2.0, ms_form="printed")
    assert m_sig.tolist() == pytest.approx([(math.exp(0.6) + math.exp(0.2)) / 2, 1.0])
    m_sig_neg = G.relative_term("sig-ms", s, others, members, positive=False, beta=10.0, ms_form="printed")
    assert m_sig_neg.tolist() == pytest.approx([(math.exp(-3.0) + math.exp(-1.0)) / 2, 1.0])
    # MS loss's own form adds the selected pair's e^0 = 1 and sums: m >= 1 (the default)
    m_sig = G.relative_term("sig-ms", s, others, members, positive=True, alpha=2.0)
    assert m_sig.tolist() == pytest.approx([1 + math.exp(0.6) + math.exp(0.2), 1.0])
    m_sig_neg = G.relative_term("sig-ms", s, others, members, positive=False, beta=10.0, ms_form="ms-loss")
    assert m_sig_neg.tolist() == pytest.approx([1 + math.exp(-3.0) + math.exp(-1.0), 1.0])
    for form in G.MS_FORMS:  # lin-ms is GOAL's own eq. 13, a mean in both readings
        m_lin = G.relative_term("lin-ms", s, others, members, positive=True, ms_form=form)
        assert m_lin.tolist() == pytest.approx([(0.3 + 0.1) / 2, 0.0])


# --------------------------------------------------------------------------- the GOAL gradient


@pytest.mark.parametrize("mask_name", list(MASKS))
@pytest.mark.parametrize("triplet,pair", COMBOS + [(t, "sig-ms printed") for t in G.GOAL_TRIPLETS])
def test_goal_backward_matches_slow_reference(triplet, pair, mask_name):
    p = PARAMS
    if pair == "sig-ms printed":
        pair, p = "sig-ms", {**PARAMS, "ms_form": "printed"}
    S, mask = batch(mask_name)
    stats: list = []
    want = ref_goal(S, mask, triplet, pair, p, stats=stats)
    got = goal_backward(S, triplet, pair, mask, **p)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(G.goal_gradient(S, triplet, pair, pos_mask=mask, **p), want, rtol=1e-10, atol=1e-12)
    assert bool((want != 0).any())
    if pair in ("lin-ms", "sig-ms"):  # the MS sets must really be exercised, with several members
        assert max(n_n for _, n_n in stats) >= 2
        # P holds the anchor's *other* positives: none with one caption per image, some where an anchor has several
        assert max(n_p for n_p, _ in stats) == 0 if mask is None else max(n_p for n_p, _ in stats) >= 1


@pytest.mark.parametrize("triplet,pair", [("cir", "sig-ms"), ("nca", "lin-ms"), ("cir", "sig")])
@pytest.mark.parametrize("ms_form", G.MS_FORMS)
def test_goal_backward_other_hyperparameters(triplet, pair, ms_form):
    p = dict(margin=0.5, tau=3.0, alpha=1.0, beta=5.0, lam=0.2, eps=0.3, ms_form=ms_form)
    S, mask = batch("repeated_image", seed=3)
    torch.testing.assert_close(goal_backward(S, triplet, pair, mask, **p), ref_goal(S, mask, triplet, pair, p))


def test_hand_worked_2x2():
    S = torch.tensor([[0.8, 0.3], [0.5, 0.6]], dtype=torch.float64, requires_grad=True)
    # (con, con), m = 0.2: only image query 1 violates (0.2 + 0.5 - 0.6 = 0.1 > 0);
    # caption queries: 0.2 + 0.5 - 0.8 < 0 and 0.2 + 0.3 - 0.6 < 0.
    value = G.goal_objective(S, "con", "con", margin=0.2)
    value.backward()
    assert float(value.detach()) == pytest.approx(0.1)
    assert S.grad.tolist() == [[0.0, 0.0], [1.0, -1.0]]
    # (nca, lin), tau = 10: four triplets, T = 1 / (1 + e^{10 (s_pos - s_neg)}),
    # P+ = 1 - s_pos, P- = s_neg.
    t = lambda sp, sn: 1 / (1 + math.exp(10 * (sp - sn)))  # noqa: E731
    want = [
        [-(t(0.8, 0.3) + t(0.8, 0.5)) * 0.2, t(0.8, 0.3) * 0.3],
        [t(0.6, 0.5) * 0.5 + t(0.8, 0.5) * 0.5, -(t(0.6, 0.5) + t(0.6, 0.3)) * 0.4],
    ]
    want[0][1] += t(0.6, 0.3) * 0.3
    got = G.goal_gradient(S, "nca", "lin", tau=10.0)
    torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64))


def test_con_con_is_the_triplet_hardest_gradient():
    for mask_name in MASKS:
        for margin in (0.0, 0.2, 0.6):
            S, mask = batch(mask_name, seed=7)
            loss = losses.triplet_hardest(S, margin, "sum", pos_mask=mask)
            loss.backward()
            S2 = S.detach().clone().requires_grad_()
            value = G.goal_objective(S2, "con", "con", margin=margin, pos_mask=mask)
            value.backward()
            torch.testing.assert_close(S2.grad, S.grad, rtol=0, atol=1e-15)
            torch.testing.assert_close(value, loss)  # the logging value is that loss


def nca_hard_negative_loss(S: torch.Tensor, mask, tau: float) -> torch.Tensor:
    """Eq. 6 literally: for every query, its positive against its hardest negative only."""
    total = S.new_zeros(())
    for i, j, c, r in hardest_triplets(S, mask):
        for sp, sn in ((S[i, j], S[i, c]), (S[i, j], S[r, j])):
            total = total - torch.log(torch.exp(tau * sp) / (torch.exp(tau * sp) + torch.exp(tau * sn)))
    return total


@pytest.mark.parametrize("tau", [1.0, 10.0, 30.0])
@pytest.mark.parametrize("mask_name", ["diagonal", "repeated_image"])
def test_nca_con_is_the_nca_gradient_over_tau(tau, mask_name):
    """d l^nca / d s_neg = tau * T^nca (Appendix): GOAL (nca, con) = grad(eq. 6) / tau."""
    S, mask = batch(mask_name, seed=11)
    nca_hard_negative_loss(S, mask, tau).backward()
    torch.testing.assert_close(goal_backward(S, "nca", "con", mask, tau=tau), S.grad / tau)


def test_cir_lin_is_the_circle_gradient_over_two_tau():
    """Table 1: (cir, lin) is Circle loss. For one triplet with O_p = 1, O_n = 0 (margin 0),
    l = log(1 + exp(tau (s_n^2 - s_p (2 - s_p)))), so dl/ds_p = -2 tau T^cir (1 - s_p) and
    dl/ds_n = 2 tau T^cir s_n: the GOAL gradient is grad(l) / (2 tau) (all s_n >= 0 here)."""
    tau = 10.0
    S = (torch.rand(6, 6, generator=torch.Generator().manual_seed(5), dtype=torch.float64) * 0.9 + 0.05)
    S.requires_grad_()
    total = S.new_zeros(())
    for i, j, c, r in hardest_triplets(S, None):
        for sn in (S[i, c], S[r, j]):
            total = total + torch.log1p(torch.exp(tau * (sn**2 - S[i, j] * (2 - S[i, j]))))
    total.backward()
    torch.testing.assert_close(goal_backward(S, "cir", "lin", tau=tau), S.grad / (2 * tau))


def test_con_sig_is_the_binomial_deviance_gradient():
    """Table 1: (con, sig) is binomial deviance, l = log(1 + e^{-a(s_p - lam)}) + log(1 + e^{b(s_n - lam)}),
    when every triplet is active (large margin): positives scaled by 1/alpha, negatives by 1/beta."""
    alpha, beta, lam = 2.0, 10.0, 0.5
    S, _ = batch("diagonal", seed=9)
    total = S.new_zeros(())
    for i, j, c, r in hardest_triplets(S, None):
        for sn in (S[i, c], S[r, j]):
            total = total + torch.log1p(torch.exp(-alpha * (S[i, j] - lam))) + torch.log1p(torch.exp(beta * (sn - lam)))
    total.backward()
    scale = torch.where(torch.eye(6, dtype=torch.bool), 1 / alpha, 1 / beta).double()
    got = goal_backward(S, "con", "sig", margin=3.0, alpha=alpha, beta=beta, lam=lam)
    torch.testing.assert_close(got, S.grad * scale)


@pytest.mark.parametrize("pair", ["lin", "sig"])
def test_ms_with_empty_sets_falls_back(pair):
    """Well-separated batch, eps = 0: P and N are empty, so the MS weights are eqs. 10 / 11."""
    S = torch.full((5, 5), -0.4, dtype=torch.float64) + torch.diag(torch.linspace(0.6, 0.9, 5, dtype=torch.float64))
    S[0, 3] = S[2, 1] = -0.1  # distinct hardest negatives, no other negative above min positive
    for triplet in G.GOAL_TRIPLETS:
        ms = G.goal_gradient(S, triplet, pair + "-ms", eps=0.0, margin=1.5)
        plain = G.goal_gradient(S, triplet, pair, eps=0.0, margin=1.5)
        assert bool((plain != 0).any())
        torch.testing.assert_close(ms, plain)


def test_gradient_reaches_embeddings_as_eq_3():
    """dl/dx_i = sum_j dl/dS_ij y_j (eq. 3), and an upstream factor scales it."""
    g = torch.Generator().manual_seed(2)
    img = torch.randn(5, 4, generator=g, dtype=torch.float64, requires_grad=True)
    txt = torch.randn(5, 4, generator=g, dtype=torch.float64, requires_grad=True)
    S = (img / 3) @ (txt / 3).T
    (2.5 * G.goal_objective(S, "cir", "sig-ms")).backward()
    dS = 2.5 * G.goal_gradient(S, "cir", "sig-ms")
    torch.testing.assert_close(img.grad, dS @ (txt.detach() / 9))
    torch.testing.assert_close(txt.grad, dS.T @ (img.detach() / 9))


def test_goal_objective_float32_and_no_grad_through_weights():
    S = random_S(6, seed=4).detach().float().requires_grad_()
    value = G.goal_objective(S, "nca", "sig-ms")
    assert value.dim() == 0 and value.dtype == torch.float32
    value.backward()
    want = ref_goal(S.double(), None, "nca", "sig-ms")
    torch.testing.assert_close(S.grad.double(), want, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------- properties


def allowed_entries(S: torch.Tensor, mask) -> tuple[torch.Tensor, torch.Tensor]:
    """Positive entries, and every entry tied for the hardest negative of some query."""
    s = S.detach()
    pos = torch.eye(*s.shape, dtype=torch.bool) if mask is None else mask
    hard = torch.zeros_like(pos)
    for i, j in pos.nonzero().tolist():
        row_max = max(float(s[i, c]) for c in range(s.shape[1]) if not pos[i, c])
        col_max = max(float(s[r, j]) for r in range(s.shape[0]) if not pos[r, j])
        hard[i] |= ~pos[i] & (s[i] == row_max)
        hard[:, j] |= ~pos[:, j] & (s[:, j] == col_max)
    return pos, hard


@pytest.mark.parametrize("triplet,pair", COMBOS)
@settings(max_examples=15, deadline=None)
@given(
    values=st.integers(2, 5).flatmap(
        lambda n: arrays(np.float64, (n, n), elements=st.floats(-1, 1, allow_nan=False, allow_subnormal=False))
    )
)
def test_gradient_finite_sparse_and_signed(triplet, pair, values):
    S = torch.from_numpy(values)
    grad = goal_backward(S, triplet, pair)
    assert bool(torch.isfinite(grad).all())
    pos, hard = allowed_entries(S, None)
    assert bool((grad[~pos & ~hard] == 0).all())  # nothing outside positives and hardest negatives
    assert bool((grad[pos] <= 0).all())  # positives are pulled in
    assert bool((grad[~pos] >= 0).all())  # hardest negatives are pushed away


@pytest.mark.parametrize("triplet,pair", COMBOS)
def test_gradient_finite_at_extremes(triplet, pair):
    mask = repeated_image_mask()
    for fill in (-1.0, 0.0, 1.0):
        for S in (torch.full((6, 6), fill), torch.where(mask, -1.0, 1.0), torch.where(mask, 1.0, -1.0)):
            grad = goal_backward(S.double(), triplet, pair, mask)
            assert bool(torch.isfinite(grad).all())
            assert bool((grad[mask] <= 0).all()) and bool((grad[~mask] >= 0).all())


# --------------------------------------------------------------------------- bounded MS weights


def spread_cosines(seed: int, n: int = 6) -> torch.Tensor:
    """The issue's batch: spread cosines, torch.randn(n, n).clamp(-1, 1)."""
    return torch.randn(n, n, generator=torch.Generator().manual_seed(seed)).clamp(-1, 1)


@pytest.mark.parametrize("lam", [0.5, 1.0])
@pytest.mark.parametrize("triplet", G.GOAL_TRIPLETS)
def test_sig_ms_bounded_at_ms_loss_own_setting(triplet, lam):
    """alpha = 2, beta = 50 (MS loss's setting): every |dL/dS| <= 2 on the diagonal layout, for any seed."""
    worst = max(float(G.goal_gradient(spread_cosines(seed), triplet, "sig-ms", alpha=2.0, beta=50.0, lam=lam)
                      .abs().max()) for seed in range(30))
    assert worst <= 2.0


def test_printed_sig_ms_explodes_and_names_beta():
    """Eq. 12 as printed: weights up to 1/m, ~1e10 here (why it is not the default); larger beta overflows."""
    S = spread_cosines(0)
    printed = G.goal_gradient(S, "con", "sig-ms", alpha=2.0, beta=50.0, lam=0.5, ms_form="printed")
    assert float(printed.abs().max()) > 1e6
    with pytest.raises(FloatingPointError, match="beta=200") as err:
        G.goal_gradient(S, "con", "sig-ms", alpha=2.0, beta=200.0, lam=0.5, ms_form="printed")
    assert "report" not in str(err.value) and "ms_form='ms-loss'" in str(err.value)
    G.goal_gradient(S, "con", "sig-ms", alpha=2.0, beta=1e4, lam=0.5)  # the default stays finite


@settings(max_examples=40, deadline=None)
@given(
    values=st.integers(2, 6).flatmap(
        lambda n: arrays(np.float64, (n, n), elements=st.floats(-1, 1, allow_nan=False, allow_subnormal=False))
    ),
    alpha=st.floats(0.1, 50.0), beta=st.floats(0.1, 300.0), lam=st.floats(-1.0, 1.0), eps=st.floats(0.0, 0.5),
    triplet=st.sampled_from(G.GOAL_TRIPLETS),
)
def test_sig_ms_weights_bounded_property(values, alpha, beta, lam, eps, triplet):
    """MS loss's reading: P^sig-ms <= min(1, P^sig), so |dL/dS_ij| <= 2 when the positives are on the diagonal."""
    S = torch.from_numpy(values)
    kw = dict(alpha=alpha, beta=beta, lam=lam, eps=eps)
    grad = G.goal_gradient(S, triplet, "sig-ms", **kw)
    assert bool(torch.isfinite(grad).all()) and float(grad.abs().max()) <= 2.0 + 1e-12
    s = S.flatten()
    for positive in (True, False):
        others = s[None, :].expand(s.numel(), -1)
        members = torch.rand(others.shape, generator=torch.Generator().manual_seed(0)) < 0.5
        m = G.relative_term("sig-ms", s, others, members, positive, alpha, beta)
        assert bool((m >= 1).all())
        weight = G.pair_weight("sig-ms", s, positive, alpha, beta, lam, rel=m)
        assert bool((weight <= G.pair_weight("sig", s, positive, alpha, beta, lam) + 1e-15).all())


# --------------------------------------------------------------------------- GoalConfig


def test_goal_config_validates_and_describes():
    cfg = G.GoalConfig("cir", "sig-ms", beta=50)
    assert cfg.beta == 50.0 and isinstance(cfg.beta, float)
    assert cfg.name == "goal:cir,sig-ms" and cfg.label == "GOAL (cir, sig-ms)" and cfg.known_as == "New"
    assert cfg.params() == {"tau": 10.0, "alpha": 2.0, "beta": 50.0, "lam": 0.5, "eps": 0.1, "ms_form": "ms-loss"}
    assert G.GoalConfig().params() == {"margin": 0.2} and G.GoalConfig("con", "con").known_as == "Triplet"
    assert G.GoalConfig.from_name("goal:nca,lin", tau=3) == G.GoalConfig("nca", "lin", tau=3.0)
    for triplet, pair in COMBOS:  # params() is TRIPLET_PARAMS then PAIR_PARAMS, every one a field
        keys = list(G.GoalConfig(triplet, pair).params())
        form = ("ms_form",) if pair == "sig-ms" else ()
        assert keys == list(dict.fromkeys(G.TRIPLET_PARAMS[triplet] + G.PAIR_PARAMS[pair] + form))
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.beta = 1.0  # type: ignore[misc]
    for kw, name in [({"triplet": "tri"}, "triplet"), ({"pair": "ms"}, "pair"), ({"tau": 0.0}, "tau"),
                     ({"alpha": -1.0}, "alpha"), ({"beta": 0}, "beta"), ({"margin": -0.1}, "margin"),
                     ({"eps": -0.1}, "eps"), ({"lam": math.inf}, "lam"), ({"ms_form": "mean"}, "ms_form")]:
        with pytest.raises(ValueError, match=f"^{name}"):
            G.GoalConfig(**kw)
    with pytest.raises(TypeError, match="^alpha"):
        G.GoalConfig(alpha="2")


def test_goal_config_and_keywords_give_the_same_gradient():
    S, mask = batch("repeated_image", seed=5)
    cfg = G.GoalConfig("cir", "sig-ms", tau=5.0, beta=30.0, ms_form="printed")
    loose = G.goal_gradient(S, "cir", "sig-ms", tau=5.0, beta=30.0, ms_form="printed", pos_mask=mask)
    torch.testing.assert_close(G.goal_gradient(S, config=cfg, pos_mask=mask), loose)
    S2 = S.detach().clone().requires_grad_()
    G.goal_objective(S2, config=cfg, pos_mask=mask).backward()
    torch.testing.assert_close(S2.grad, loose)
    with pytest.raises(ValueError, match="not both.*beta"):
        G.goal_gradient(S, beta=30.0, config=cfg)
    with pytest.raises(TypeError, match="config"):
        G.goal_gradient(S, config={"triplet": "cir"})


def test_keyword_defaults_are_the_config_defaults():
    """The trainer validates GOAL keywords by goal_objective's signature, and reads its defaults there:
    one source. goal_gradient takes the same fields as keywords, and nothing else."""
    params = inspect.signature(G.goal_objective).parameters
    for field in dataclasses.fields(G.GoalConfig):
        assert params[field.name].default == field.default, field.name
    S = random_S(4, seed=1).detach()
    for field in dataclasses.fields(G.GoalConfig)[2:]:  # the fields after triplet and pair
        G.goal_gradient(S, "cir", "sig-ms", **{field.name: field.default})
    with pytest.raises(TypeError, match="^gama is not a GOAL parameter"):
        G.goal_gradient(S, "cir", "sig-ms", gama=2.0)


# --------------------------------------------------------------------------- dtypes and devices

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("triplet,pair", COMBOS)
def test_goal_in_every_dtype_and_device(triplet, pair, dtype, device):
    """The float64 loop reference, met in float32 and float64, on the CPU and on CUDA."""
    S, mask = batch("repeated_image", seed=6)
    want = ref_goal(S, mask, triplet, pair)
    on = S.detach().to(device=device, dtype=dtype).requires_grad_()
    G.goal_objective(on, triplet, pair, pos_mask=mask.to(device), **PARAMS).backward()
    assert on.grad.dtype == dtype and on.grad.device.type == device
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(on.grad.cpu().double(), want, **tol)


# --------------------------------------------------------------------------- bad input


def test_bad_input():
    S = random_S(4).detach()
    with pytest.raises(ValueError, match="^name"):
        G.triplet_weight("circle", S, S)
    with pytest.raises(ValueError, match="^name"):
        G.pair_weight("ms", S, True)
    with pytest.raises(ValueError, match="^triplet"):
        G.goal_objective(S, triplet="tri")
    with pytest.raises(ValueError, match="^pair"):
        G.goal_objective(S, pair="sig_ms")
    for kw, name in [({"tau": 0.0}, "tau"), ({"alpha": -1.0}, "alpha"), ({"beta": 0}, "beta"),
                     ({"margin": -0.1}, "margin"), ({"eps": -0.1}, "eps"), ({"lam": math.nan}, "lam")]:
        with pytest.raises(ValueError, match=f"^{name}"):
            G.goal_objective(S, "cir", "sig-ms", **kw)
    with pytest.raises(ValueError, match="^tau"):
        G.triplet_weight("nca", S, S, tau=-2.0)
    with pytest.raises(ValueError, match="^alpha"):
        G.pair_weight("sig", S, True, alpha=0.0)
    with pytest.raises(ValueError, match="^beta"):
        G.pair_weight("sig", S, False, beta=-1.0)
    nan_S = S.clone()
    nan_S[1, 2] = math.nan
    with pytest.raises(ValueError, match="^S"):
        G.goal_objective(nan_S)
    with pytest.raises(ValueError, match="^s_neg"):
        G.triplet_weight("con", S, torch.tensor([0.1, math.inf]))
    with pytest.raises(ValueError, match="^S"):
        G.goal_objective(torch.rand(3, 4))
    with pytest.raises(ValueError, match="^s_neg"):
        G.triplet_weight("nca", torch.zeros(3), torch.zeros(4))
    with pytest.raises(ValueError, match="^rel"):
        G.pair_weight("sig-ms", S, True)
    with pytest.raises(ValueError, match="^rel"):
        G.pair_weight("sig-ms", S, True, rel=0.0)
    with pytest.raises(ValueError, match="^rel"):
        G.pair_weight("sig", S, True, rel=1.0)
    with pytest.raises(TypeError, match="^positive"):
        G.pair_weight("lin", S, "yes")
    with pytest.raises(TypeError, match="^S"):
        G.goal_objective(S.numpy())
    with pytest.raises(ValueError, match="^ms_form"):
        G.goal_gradient(S, "con", "sig-ms", ms_form="mean")
    with pytest.raises(ValueError, match="^ms_form"):
        G.relative_term("sig-ms", S[0], S, S > 0, True, ms_form="sum")
