"""The fused diagonal paths of vlr_lib.losses and vlr_lib.goal (custom autograd Functions, hand-written backward).

Without pos_mask the losses take the fused paths; with pos_mask = the identity they take the general
(masked) paths, which tests/core/test_losses.py and test_goal.py check against the slow references.
Here the two must agree, value and gradient, in float32 and float64, at sizes where the fused paths'
selection (a sampled bracket) and column reductions really run; and every Function passes gradcheck
in float64.
"""
from __future__ import annotations

import math

import pytest
import torch

from vlr_lib import goal as G
from vlr_lib import losses as L
from vlr_lib.similarity import hardest_negatives, _hardest_negatives_diagonal

FUSED = {
    "triplet_all": lambda S, pm: L.triplet_all(S, 0.2, "sum", pos_mask=pm),
    "triplet_all_margins": lambda S, pm: L.triplet_all(S, torch.linspace(0.0, 0.4, S.shape[0], dtype=S.dtype),
                                                       "none", pos_mask=pm),
    "triplet_hardest": lambda S, pm: L.triplet_hardest(S, 0.3, "sum", pos_mask=pm),
    "triplet_hardest_margins": lambda S, pm: L.triplet_hardest(S, torch.linspace(0.0, 0.4, S.shape[0],
                                                                                 dtype=S.dtype), "none", pos_mask=pm),
    "info_nce": lambda S, pm: L.info_nce(S, 0.1, "mean", pos_mask=pm),
    "info_nce_none": lambda S, pm: L.info_nce(S, 0.05, "none", pos_mask=pm),
    "unified": lambda S, pm: L.unified(S, 0.2, 60.0, "sum", pos_mask=pm),
    "unified_margins": lambda S, pm: L.unified(S, torch.linspace(0.0, 0.4, S.shape[0], dtype=S.dtype), 30.0,
                                               "none", pos_mask=pm),
    "unified_big_gamma": lambda S, pm: L.unified(S, 0.2, 1e4, "sum", pos_mask=pm),
    "sampled_softmax": lambda S, pm: L.sampled_softmax(S, 20.0, None, "none", pos_mask=pm),
    "sampled_softmax_top1": lambda S, pm: L.sampled_softmax(S, 20.0, 1, "none", pos_mask=pm),
    "sampled_softmax_top3": lambda S, pm: L.sampled_softmax(S, 20.0, 3, "mean", pos_mask=pm),
    "sampled_softmax_top50%": lambda S, pm: L.sampled_softmax(S, 20.0, 0.5, "none", pos_mask=pm),
    "sampled_softmax_top10%": lambda S, pm: L.sampled_softmax(S, 5.0, 0.1, "sum", pos_mask=pm),
    "sampled_softmax_top_all": lambda S, pm: L.sampled_softmax(S, 20.0, 1.0, "none", pos_mask=pm),
    "sampled_softmax_top_all_but_one": lambda S, pm: L.sampled_softmax(S, 20.0, S.shape[0] - 2, "none",
                                                                       pos_mask=pm),
    "cross_example": lambda S, pm: L.cross_example_softmax(S, 20.0, None, "none", pos_mask=pm),
    "cross_example_top7": lambda S, pm: L.cross_example_softmax(S, 20.0, 7, "mean", pos_mask=pm),
    "cross_example_top50%": lambda S, pm: L.cross_example_softmax(S, 20.0, 0.5, "none", pos_mask=pm),
    "cross_example_top3%": lambda S, pm: L.cross_example_softmax(S, 20.0, 0.03, "mean", pos_mask=pm),
    **{f"goal({t},{p})": (lambda t, p: lambda S, pm: G.goal_objective(S, t, p, beta=50.0, pos_mask=pm))(t, p)
       for t in G.GOAL_TRIPLETS for p in G.GOAL_PAIRS},
}
TOL = {torch.float64: dict(rtol=1e-9, atol=1e-10), torch.float32: dict(rtol=2e-4, atol=2e-5)}


def _value_and_grad(fn, S):
    S = S.detach().clone().requires_grad_()
    value = fn(S)
    (grad,) = torch.autograd.grad(value.sum(), S)
    return value.detach(), grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [5, 300])
@pytest.mark.parametrize("name", FUSED)
def test_fused_path_matches_the_masked_path(name, n, dtype):
    g = torch.Generator().manual_seed(n)
    S = (torch.rand(n, n, generator=g, dtype=torch.float64) * 2 - 1).to(dtype)
    eye = torch.eye(n, dtype=torch.bool)
    fn = FUSED[name]
    v_fast, g_fast = _value_and_grad(lambda X: fn(X, None), S)
    v_ref, g_ref = _value_and_grad(lambda X: fn(X, eye), S)
    if name == "unified_big_gamma" and dtype == torch.float32:
        # gamma = 1e4 scales float32's rounding of S by 1e4: both paths are off the float64 gradient by ~1e-3;
        # the fused one must be no further off than the masked one
        _, g64 = _value_and_grad(lambda X: fn(X, None), S.double())
        assert (g_fast.double() - g64).abs().max() <= 1.5 * (g_ref.double() - g64).abs().max() + 1e-6
        g_ref = g_fast
    assert v_fast.dtype == g_fast.dtype == dtype
    tol = TOL[dtype]
    if name.startswith("unified") and dtype == torch.float64:
        # the masked path's softplus(threshold=20) is linear above 20, off by log(1 + e^-20) ~ 2e-9
        tol = dict(rtol=1e-9, atol=1e-8)
    torch.testing.assert_close(v_fast, v_ref, **tol)
    torch.testing.assert_close(g_fast, g_ref, **tol)


@pytest.mark.parametrize("name", FUSED)
def test_fused_paths_take_a_non_contiguous_S(name):
    """S as a transposed view (as a caller's txt @ img.T gives): the same value and gradient as its contiguous copy.
    (The cross-example mining once failed here: it viewed S's entries as one flat tensor.)"""
    g = torch.Generator().manual_seed(3)
    base = torch.rand(300, 300, generator=g, dtype=torch.float64) * 2 - 1
    fn = FUSED[name]
    v_t, g_t = _value_and_grad(lambda X: fn(X.T, None), base)
    v_c, g_c = _value_and_grad(lambda X: fn(X.T.contiguous(), None), base)
    torch.testing.assert_close(v_t, v_c, **TOL[torch.float64])
    torch.testing.assert_close(g_t, g_c, **TOL[torch.float64])


@pytest.mark.parametrize("name", [k for k in FUSED if not k.startswith("goal")])
def test_fused_functions_pass_gradcheck(name):
    g = torch.Generator().manual_seed(11)
    S = (torch.rand(7, 7, generator=g, dtype=torch.float64) * 2 - 1).requires_grad_()
    fn = FUSED[name]
    assert torch.autograd.gradcheck(lambda X: fn(X, None), (S,), eps=1e-6, atol=1e-5)


def test_fused_paths_with_tied_scores():
    """Ties (hardest negatives, the mining threshold): the fused paths still give the general paths' values,
    and a gradient of the same total."""
    S = (torch.arange(36, dtype=torch.float64).reshape(6, 6) % 4) / 4
    eye = torch.eye(6, dtype=torch.bool)
    for fn in (lambda X, pm: L.triplet_hardest(X, 0.3, pos_mask=pm),
               lambda X, pm: L.cross_example_softmax(X, 20.0, 0.5, pos_mask=pm),
               lambda X, pm: L.cross_example_softmax(X, 20.0, 3, pos_mask=pm),
               *[(lambda k: lambda X, pm: L.sampled_softmax(X, 20.0, k, "none", pos_mask=pm))(k)
                 for k in (1, 2, 3, 4, 0.5, 5)]):
        v_fast, g_fast = _value_and_grad(lambda X: fn(X, None), S)
        v_ref, g_ref = _value_and_grad(lambda X: fn(X, eye), S)
        torch.testing.assert_close(v_fast, v_ref)
        torch.testing.assert_close(g_fast.sum(), g_ref.sum())
        torch.testing.assert_close(g_fast.diagonal(), g_ref.diagonal())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("topk", [1, 2, 5, 0.5, 0.7, 1.0])
def test_sampled_top_k_with_tied_scores_per_row(topk, dtype):
    """Rows with many ties at their k-th largest negative (scores on a coarse grid): the fused path keeps exactly
    k negatives per row, as the masked path's topk does -- the sum over the c entries above the k-th largest t
    plus k - c copies of t, whichever tied entries are picked. So: the same value, the same gradient on the
    positive, and each row's gradient the same up to which tied entries carry it (the same sorted values)."""
    g = torch.Generator().manual_seed(5)
    n = 40
    S = (torch.randint(0, 5, (n, n), generator=g).double() / 4).to(dtype)
    eye = torch.eye(n, dtype=torch.bool)
    fn = lambda X, pm: L.sampled_softmax(X, 20.0, topk, "none", pos_mask=pm)
    v_fast, g_fast = _value_and_grad(lambda X: fn(X, None), S)
    v_ref, g_ref = _value_and_grad(lambda X: fn(X, eye), S)
    tol = TOL[dtype]
    torch.testing.assert_close(v_fast, v_ref, **tol)
    torch.testing.assert_close(g_fast.diagonal(), g_ref.diagonal(), **tol)
    torch.testing.assert_close(g_fast.sort(dim=1).values, g_ref.sort(dim=1).values, **tol)
    k = int(L._topk_counts(topk, torch.tensor([n - 1]))[0])
    if k < n - 1:  # (k = all negatives takes the unmined path)
        assert ((g_fast != 0).sum(1) == k + 1).all()  # k negatives and the positive


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("topk", [3, 0.5, 0.1])
def test_cross_example_mining_with_tied_scores_at_a_bracketed_size(topk, dtype):
    """Cross-example mining where the threshold's selection runs its sampled bracket (N (N - 1) > 2^16) on
    scores with many ties at the threshold: the same value as the masked path, the same gradient on the
    positives and in all, and one gradient for all the entries tied at the threshold."""
    g = torch.Generator().manual_seed(8)
    n = 300
    S = (torch.randint(0, 9, (n, n), generator=g).double() / 8).to(dtype)
    eye = torch.eye(n, dtype=torch.bool)
    fn = lambda X, pm: L.cross_example_softmax(X, 20.0, topk, "none", pos_mask=pm)
    v_fast, g_fast = _value_and_grad(lambda X: fn(X, None), S)
    v_ref, g_ref = _value_and_grad(lambda X: fn(X, eye), S)
    tol = TOL[dtype]
    torch.testing.assert_close(v_fast, v_ref, **tol)
    torch.testing.assert_close(g_fast.diagonal(), g_ref.diagonal(), **tol)
    off = ~eye
    torch.testing.assert_close(g_fast[off].sum(), g_ref[off].sum(), **tol)
    k = int(L._topk_counts(topk, torch.tensor([n * (n - 1)]))[0])
    t = S[off].kthvalue(n * (n - 1) - k + 1).values
    at = g_fast[off][S[off] == t]
    assert at.numel() > 1 and torch.equal(at, at[:1].expand_as(at))


def test_hardest_negatives_diagonal_matches_hardest_negatives():
    g = torch.Generator().manual_seed(3)
    S = torch.randint(0, 5, (50, 50), generator=g).double()  # many ties: the first index wins, as torch.max
    neg = ~torch.eye(50, dtype=torch.bool)
    rows, cols, W = _hardest_negatives_diagonal(S)
    r, c = hardest_negatives(S, neg), hardest_negatives(S.T, neg.T)
    assert torch.equal(rows.values, r.values) and torch.equal(cols.values, c.values)
    assert torch.equal(rows.indices, r.indices) and torch.equal(cols.indices, c.indices)
    assert torch.isinf(W.diagonal()).all() and torch.equal(W[neg], S[neg])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", ["random", "sorted", "reversed", "ties", "with_inf"])
@pytest.mark.parametrize("n", [200_000, 1_000])  # sampled bracket / topk and kthvalue over all
def test_kth_largest_is_exact(kind, dtype, n):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, generator=g, dtype=dtype)
    if kind == "sorted":
        x = x.sort().values
    elif kind == "reversed":
        x = x.sort(descending=True).values
    elif kind == "ties":
        x = torch.randint(0, 7, (n,), generator=g).to(dtype)
    elif kind == "with_inf":
        x[::9] = -math.inf
    # The exact k-th largest, read off one full sort (kthvalue, the other exact reference, takes about a second per k
    # on the reversed input: its quickselect's worst case).
    ascending = x.sort().values
    for k in (1, 5, 256, 257, 1000, n // 3, n // 2, n - n // 9 - 1, n - 1, n):
        expected = ascending[n - k]
        assert L._kth_largest(x, k) == expected, k
        t, count = L._kth_largest_count(x, k)
        assert t == expected and count == int((x >= expected).sum()), k
