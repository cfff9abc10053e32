"""vlr_lib.losses against slow references, its limits, its invariances and bad input."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tests.core import references as ref
from vlr_lib import losses as L
from vlr_lib import registry


def random_S(n: int = 6, m: int | None = None, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, m or n, generator=g, dtype=torch.float64) * 2 - 1).requires_grad_()


def repeated_image_mask() -> torch.Tensor:
    """A batch of 6 captions where image 2 appears twice (rows 2 and 4): a false negative pair."""
    ids = torch.tensor([0, 1, 2, 3, 2, 5])
    return ids[:, None] == ids[None, :]


def five_caption_mask(n_img: int = 3) -> torch.Tensor:
    """n_img images x 5*n_img captions, caption c belongs to image c // 5."""
    return torch.arange(n_img)[:, None] == (torch.arange(5 * n_img) // 5)[None, :]


def _scalar(x: float) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64)


MASKS = {"diagonal": None, "repeated_image": repeated_image_mask()}


CASES = ref.CASES


def _value_and_grad(fn, S):
    S = S.detach().clone().requires_grad_()
    value = fn(S)
    (grad,) = torch.autograd.grad(value, S)
    return value.detach(), grad


@pytest.mark.parametrize("mask_name", MASKS)
@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_slow_reference_value_and_gradient(name, mask_name, seed):
    fast, slow = CASES[name]
    mask = MASKS[mask_name]
    S = random_S(6, seed=seed)
    v_fast, g_fast = _value_and_grad(lambda X: fast(X, mask), S)
    v_slow, g_slow = _value_and_grad(lambda X: slow(X, ref.as_lists(mask, 6, 6)), S)
    torch.testing.assert_close(v_fast, v_slow, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(g_fast, g_slow, rtol=1e-8, atol=1e-10)


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))]
TOLERANCE = {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=2e-4, atol=2e-5)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mask_name", MASKS)
@pytest.mark.parametrize("name", CASES)
def test_matches_reference_in_every_dtype_and_device(name, mask_name, dtype, device):
    """The float64 CPU reference, met by the loss run in float32 and float64, on the CPU and on CUDA."""
    fast, slow = CASES[name]
    mask = MASKS[mask_name]
    S = random_S(6, seed=3)
    v_slow, g_slow = _value_and_grad(lambda X: slow(X, ref.as_lists(mask, 6, 6)), S)
    on = S.detach().to(device=device, dtype=dtype)
    v_fast, g_fast = _value_and_grad(lambda X: fast(X, None if mask is None else mask.to(device)), on)
    assert v_fast.dtype == g_fast.dtype == dtype and g_fast.device.type == device
    torch.testing.assert_close(v_fast.cpu().double(), v_slow, **TOLERANCE[dtype])
    torch.testing.assert_close(g_fast.cpu().double(), g_slow, **TOLERANCE[dtype])


@pytest.mark.parametrize(
    "name", ["triplet_all", "triplet_hardest", "info_nce", "unified", "sampled_softmax", "smooth_ap_soft",
             "clip_learned", "siglip_balanced"]
)
def test_five_captions_per_image(name):
    """Rectangular S: 3 images x 15 captions, 5 positives per image row."""
    fast, slow = CASES[name]
    mask = five_caption_mask(3)
    S = random_S(3, 15, seed=4)  # the row-wise losses: image queries with 5 positives each
    v_fast, g_fast = _value_and_grad(lambda X: fast(X, mask), S)
    v_slow, g_slow = _value_and_grad(lambda X: slow(X, ref.as_lists(mask, 3, 15)), S)
    torch.testing.assert_close(v_fast, v_slow, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(g_fast, g_slow, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize(
    "fn",
    [
        lambda S: L.info_nce(S, 0.1),
        lambda S: L.unified(S, 0.2, 60.0),
        lambda S: L.sampled_softmax(S, 20.0),
        lambda S: L.cross_example_softmax(S, 20.0),
        lambda S: L.smooth_ap(S, 0.1),
        lambda S: L.unified(S, 0.2, 10.0, pos_mask=repeated_image_mask()),
    ],
    ids=["info_nce", "unified", "sampled_softmax", "cross_example", "smooth_ap", "unified_masked"],
)
def test_gradcheck_smooth_losses(fn):
    S = random_S(6, seed=5)
    assert torch.autograd.gradcheck(fn, (S,), eps=1e-6, atol=1e-5)


def test_triplet_gradient_matches_bleeker_eq9():
    """dL/dS of triplet_hardest: -1 on the positive, +1 on the hardest negative, per violating query."""
    S = random_S(5, seed=7)
    m = 0.5
    (grad,) = torch.autograd.grad(L.triplet_hardest(S, m), S)
    expected = torch.zeros_like(S)
    Sd = S.detach()
    for i in range(5):
        negs = [(Sd[i, n], n) for n in range(5) if n != i]
        s_neg, n = max(negs)
        if m + s_neg - Sd[i, i] > 0:
            expected[i, i] -= 1
            expected[i, n] += 1
        negs = [(Sd[n, i], n) for n in range(5) if n != i]
        s_neg, n = max(negs)
        if m + s_neg - Sd[i, i] > 0:
            expected[i, i] -= 1
            expected[n, i] += 1
    torch.testing.assert_close(grad, expected)


# ----------------------------------------------------------------------------- limits (Li eqs. 6-7)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("margin", [0.0, 0.2, 0.5])
def test_unified_large_gamma_is_triplet_hardest(seed, margin):
    """(1/g) log(1 + sum e^{g x}) - max(0, max x) lies in [0, log(N)/g]: the bound is the test."""
    S = random_S(8, seed=seed).detach()
    gamma = 1e4
    gap = L.unified(S, margin, gamma) - L.triplet_hardest(S, margin)
    bound = 2 * 8 * math.log(8) / gamma
    assert -1e-12 <= float(gap) <= bound


def test_unified_large_gamma_stays_finite_in_float32():
    S = random_S(64, seed=3).detach().float().requires_grad_()
    value = L.unified(S, 0.2, 1e4)
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(S.grad).all()
    torch.testing.assert_close(value, L.triplet_hardest(S.detach(), 0.2), atol=2 * 64 * math.log(64) / 1e4, rtol=0)


@pytest.mark.parametrize("gamma", [1.0, 10.0, 60.0, 500.0])
@pytest.mark.parametrize("mask_name", MASKS)
def test_unified_zero_margin_is_info_nce(gamma, mask_name):
    mask = MASKS[mask_name]
    S = random_S(6, seed=2)
    a, ga = _value_and_grad(lambda X: gamma * L.unified(X, 0.0, gamma, pos_mask=mask), S)
    b, gb = _value_and_grad(lambda X: L.info_nce(X, 1 / gamma, "sum", pos_mask=mask), S)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(ga, gb)


def test_unified_weighted_eq24_and_adaptive_margin_eq26():
    S = random_S(5, seed=8)
    W = (torch.rand(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) + 0.5)
    margins = torch.tensor([0.0, 0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    pos = ref.diagonal(5)
    v, g = _value_and_grad(lambda X: L.unified(X, margins, 30.0, weights=W), S)
    v_ref, g_ref = _value_and_grad(lambda X: ref.unified(X, margins, 30.0, pos, weights=W), S)
    torch.testing.assert_close(v, v_ref)
    torch.testing.assert_close(g, g_ref)
    # eq. 27: the adaptive margin's gamma -> inf limit is NCR's per-sample-margin hinge.
    gap = L.unified(S.detach(), margins, 1e4) - L.triplet_hardest(S.detach(), margins)
    assert -1e-12 <= float(gap) <= 2 * 5 * math.log(5) / 1e4
    t_ref = ref.triplet_hardest(S.detach(), margins, pos)
    torch.testing.assert_close(L.triplet_hardest(S.detach(), margins), t_ref)


def test_smooth_ap_small_tau_is_exact_ap():
    """tau -> 0 turns the sigmoid into the indicator: 1 - SmoothAP -> 1 - AP (Bleeker eq. 5)."""
    S = torch.tensor([[0.9, 0.1, 0.5, 0.7], [0.2, 0.8, 0.95, 0.1]], dtype=torch.float64)
    mask = torch.tensor([[True, False, False, True], [False, True, True, False]])
    # row 0: ranking 0.9(+) 0.7(+) 0.5 0.1 -> AP = (1/1 + 2/2)/2 = 1
    # row 1: ranking 0.95(+) 0.8(+) 0.2 0.1 -> AP = 1
    assert float(L.smooth_ap(S, 1e-4, pos_mask=mask)) == pytest.approx(0.0, abs=1e-9)
    S2 = torch.tensor([[0.1, 0.9, 0.5, 0.7]], dtype=torch.float64)
    mask2 = torch.tensor([[True, False, False, True]])
    # ranking 0.9 0.7(+) 0.5 0.1(+) -> precision at the positives: 1/2 and 2/4 -> AP = 1/2
    assert float(L.smooth_ap(S2, 1e-4, pos_mask=mask2)) == pytest.approx(0.5, abs=1e-9)


def test_reductions_relate():
    S = random_S(6, seed=9).detach()
    for fn in (L.triplet_all, L.triplet_hardest, L.info_nce, L.unified, L.sampled_softmax,
               L.cross_example_softmax, L.smooth_ap):
        per = fn(S, reduction="none")
        assert per.shape == (6,)
        torch.testing.assert_close(fn(S, reduction="sum"), per.sum())
        torch.testing.assert_close(fn(S, reduction="mean"), per.mean())


def test_topk_all_equals_no_mining():
    """1.0 (every negative, as a fraction) and the full count are both "no mining", for both losses."""
    S = random_S(6, seed=10).detach()
    torch.testing.assert_close(L.cross_example_softmax(S, topk=1.0), L.cross_example_softmax(S))
    torch.testing.assert_close(L.cross_example_softmax(S, topk=30), L.cross_example_softmax(S))
    torch.testing.assert_close(L.sampled_softmax(S, topk=5), L.sampled_softmax(S))
    torch.testing.assert_close(L.sampled_softmax(S, topk=1.0), L.sampled_softmax(S))


@pytest.mark.parametrize("count, fraction, available", [(1, 0.2, 5), (2, 0.4, 5), (3, 0.5, 5), (3, 0.3, 10),
                                                        (1, 0.01, 30), (15, 0.5, 30), (9, 0.3, 30)])
def test_topk_fraction_is_the_rounded_up_count(count, fraction, available):
    """A float is ceil(fraction * negatives), exact in decimal: 0.3 of 10 is 3 (in binary, 0.3 * 10 > 3)."""
    if available == 5:
        S = random_S(6, seed=12).detach()
        torch.testing.assert_close(L.sampled_softmax(S, topk=fraction), L.sampled_softmax(S, topk=count))
    else:  # 11 x 11 has 10 negatives per row; 6 x 6 has 30 in the batch
        S = random_S(11 if available == 10 else 6, seed=12).detach()
        fn = L.sampled_softmax if available == 10 else L.cross_example_softmax
        torch.testing.assert_close(fn(S, topk=fraction), fn(S, topk=count))


@pytest.mark.parametrize("fn", [L.sampled_softmax, L.cross_example_softmax])
def test_topk_accepts_numpy_numbers(fn):
    import numpy as np

    S = random_S(6, seed=13).detach()
    torch.testing.assert_close(fn(S, topk=np.int64(2)), fn(S, topk=2))
    torch.testing.assert_close(fn(S, topk=np.float64(0.5)), fn(S, topk=0.5))


def test_topk_one_sampled_softmax_is_softplus_of_hardest_gap():
    """SNM with k = 1: -log sigmoid(lambda (s_pos - s_hardest))."""
    S = random_S(6, seed=11).detach()
    hardest = S.masked_fill(torch.eye(6, dtype=torch.bool), -2).max(dim=1).values
    expected = torch.nn.functional.softplus(20.0 * (hardest - S.diagonal())).mean()
    torch.testing.assert_close(L.sampled_softmax(S, 20.0, topk=1), expected)


# ----------------------------------------------------------------------------- properties

ALL = {
    "triplet_all": lambda S: L.triplet_all(S),
    "triplet_hardest": lambda S: L.triplet_hardest(S),
    "info_nce": lambda S: L.info_nce(S),
    "unified": lambda S: L.unified(S),
    "unified_big_gamma": lambda S: L.unified(S, 0.2, 1e4),
    "sampled_softmax": lambda S: L.sampled_softmax(S),
    "sampled_softmax_topk": lambda S: L.sampled_softmax(S, topk=1),
    "cross_example_softmax": lambda S: L.cross_example_softmax(S),
    "cross_example_topk": lambda S: L.cross_example_softmax(S, topk=0.5),
    "smooth_ap": lambda S: L.smooth_ap(S),
    "clip_learned": lambda S: L.clip_learned(S),
    "clip_learned_at_clamp": lambda S: L.clip_learned(S, L.LOGIT_SCALE_MAX),
    "siglip": lambda S: L.siglip(S),
    "siglip_at_clamp": lambda S: L.siglip(S, L.LOGIT_SCALE_MAX, -5.0),
}

bounded_S = st.integers(2, 7).flatmap(
    lambda n: arrays("float64", (n, n), elements=st.floats(-1.0, 1.0, allow_nan=False, width=64))
)


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=40, deadline=None)
@given(S_np=bounded_S, perm_seed=st.integers(0, 10_000))
def test_properties(name, S_np, perm_seed):
    """Permuting the batch changes nothing; losses are >= 0; gradients finite for |S| <= 1."""
    fn = ALL[name]
    S = torch.from_numpy(S_np).requires_grad_()
    value = fn(S)
    (grad,) = torch.autograd.grad(value, S)
    assert float(value.detach()) >= 0.0
    assert torch.isfinite(grad).all()
    perm = torch.randperm(S.shape[0], generator=torch.Generator().manual_seed(perm_seed))
    permuted = fn(S.detach()[perm][:, perm])
    torch.testing.assert_close(permuted, value.detach(), rtol=1e-9, atol=1e-9)


def test_perfect_batch_gives_zero_hinge_losses():
    S = torch.eye(5, dtype=torch.float64) * 0.9  # positives 0.9, negatives 0: margin 0.2 is met
    assert float(L.triplet_all(S)) == 0.0
    assert float(L.triplet_hardest(S)) == 0.0
    assert float(L.unified(S, 0.2, 1e4)) == pytest.approx(0.0, abs=1e-3)


def test_float32_and_dtype_preserved():
    S = random_S(5, seed=1).detach().float()
    for fn in ALL.values():
        assert fn(S).dtype == torch.float32


# ----------------------------------------------------------------------------- bad input

BAD = [
    (torch.rand(4), "S"),
    (torch.rand(2, 3, 3), "S"),
    (torch.rand(3, 4), "S must be square"),
    (torch.rand(1, 1), "S must be at least 2x2"),
    (torch.tensor([[0.1, float("nan")], [0.2, 0.3]]), "S contains NaN"),
    (torch.tensor([[0.1, float("inf")], [0.2, 0.3]]), "S contains NaN or inf"),
]


@pytest.mark.parametrize("name", registry.names())
@pytest.mark.parametrize("S, match", BAD)
def test_bad_similarity(name, S, match):
    with pytest.raises(ValueError, match=match):
        registry.entry(name).fn(S)


@pytest.mark.parametrize("name", ["triplet_all", "triplet_hardest", "info_nce", "unified", "smooth_ap"])
def test_bad_pos_mask(name):
    fn = registry.entry(name).fn
    S = torch.rand(4, 4)
    with pytest.raises(ValueError, match="pos_mask must have the shape"):
        fn(S, pos_mask=torch.ones(3, 4, dtype=torch.bool))
    no_positive = torch.eye(4, dtype=torch.bool)
    no_positive[2, 2] = False
    with pytest.raises(ValueError, match="pos_mask has a row without positives"):
        fn(S, pos_mask=no_positive)
    with pytest.raises(ValueError, match="pos_mask has a row without negatives"):
        fn(S, pos_mask=torch.ones(4, 4, dtype=torch.bool) | torch.eye(4, dtype=torch.bool))
    with pytest.raises(TypeError, match="pos_mask"):
        fn(S, pos_mask=torch.eye(4))


def test_bad_pos_mask_column_for_two_way_losses():
    mask = torch.zeros(2, 3, dtype=torch.bool)
    mask[0, 0] = mask[1, 1] = True  # column 2 has no positive
    with pytest.raises(ValueError, match="pos_mask has a column without positives"):
        L.info_nce(torch.rand(2, 3), pos_mask=mask)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda S: L.info_nce(S, temperature=0.0), "temperature"),
        (lambda S: L.info_nce(S, temperature=-1.0), "temperature"),
        (lambda S: L.unified(S, gamma=0.0), "gamma"),
        (lambda S: L.unified(S, gamma=float("inf")), "gamma"),
        (lambda S: L.unified(S, margin=-0.1), "margin"),
        (lambda S: L.unified(S, margin=torch.ones(3)), "margin"),
        (lambda S: L.unified(S, weights=torch.ones(3, 3)), "weights"),
        (lambda S: L.triplet_all(S, margin=float("nan")), "margin"),
        (lambda S: L.smooth_ap(S, tau=0.0), "tau"),
        (lambda S: L.sampled_softmax(S, scale=0.0), "scale"),
        (lambda S: L.sampled_softmax(S, topk=0), "topk"),
        (lambda S: L.sampled_softmax(S, topk=-1), "topk"),
        (lambda S: L.sampled_softmax(S, topk=4), "topk"),
        (lambda S: L.sampled_softmax(S, topk=0.0), "topk"),
        (lambda S: L.sampled_softmax(S, topk=2.0), "topk"),
        (lambda S: L.sampled_softmax(S, topk=True), "topk"),
        (lambda S: L.sampled_softmax(S, topk="1"), "topk"),
        (lambda S: L.cross_example_softmax(S, topk=0.0), "topk"),
        (lambda S: L.cross_example_softmax(S, topk=1.5), "topk"),
        (lambda S: L.cross_example_softmax(S, topk=13), "topk"),
        (lambda S: L.cross_example_softmax(S, topk=False), "topk"),
        (lambda S: L.cross_example_softmax(S, topk=float("nan")), "topk"),
        (lambda S: L.triplet_hardest(S, reduction="avg"), "reduction"),
    ],
)
def test_bad_hyperparameters(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call(torch.rand(4, 4))


@pytest.mark.parametrize(
    "call, param",
    [
        (lambda S: L.info_nce(S.float(), temperature=1e-40), "temperature"),
        (lambda S: L.unified(S.float(), gamma=1e39), "gamma"),
        (lambda S: L.sampled_softmax(S, scale=1e308), "scale"),
        (lambda S: L.sampled_softmax(S, scale=1e308, topk=2), "scale"),
        (lambda S: L.cross_example_softmax(S, scale=1e308), "scale"),
    ],
)
def test_overflow_names_the_parameter(call, param):
    """An overflow is the parameter's doing (S is validated finite): the error names it and never blames S."""
    S = random_S(4, seed=14).detach()
    with pytest.raises(FloatingPointError, match=f"{param}=") as err:
        call(S)
    assert "report" not in str(err.value) and " S" not in str(err.value)


def test_not_a_tensor():
    with pytest.raises(TypeError, match="S must be a torch.Tensor"):
        L.info_nce([[1.0, 0.0], [0.0, 1.0]])


@pytest.mark.parametrize("k", range(1, 8))
def test_top_k_logsumexp_selection_with_ties(k):
    """The sort-free top-k sum equals the sorted one, ties at the threshold included."""
    values = torch.tensor([3.0, 1.0, 2.0, 2.0, 2.0, 0.0, -math.inf], dtype=torch.float64)
    k = min(k, 6)  # never select the -inf (a masked positive)
    expected = torch.logsumexp(values.topk(k).values, dim=0)
    torch.testing.assert_close(L._top_k_logsumexp(values, k), expected)


def test_smooth_step_is_bleeker_eq7():
    x = torch.linspace(-0.3, 0.3, 61, dtype=torch.float64)
    for tau in (0.01, 0.1, 1.0):
        torch.testing.assert_close(L.smooth_step(x, tau), 1 / (1 + torch.exp(-x / tau)))
    assert L.smooth_step(torch.tensor([-1.0, 1.0]), 1e-6).tolist() == [0.0, 1.0]  # no overflow
    with pytest.raises(ValueError, match="tau"):
        L.smooth_step(x, 0.0)


# ----------------------------------------------------------------------------- learned temperature and bias

#: (loss with tensors t', b; reference; t'; b or None): clip_learned takes no bias
LEARNED = {
    "clip_init": ("clip_learned", L.CLIP_LOGIT_SCALE_INIT, None),
    "clip_at_clamp": ("clip_learned", L.LOGIT_SCALE_MAX, None),
    "clip_lowest": ("clip_learned", L.LOGIT_SCALE_MIN, None),
    "siglip_init": ("siglip", L.SIGLIP_LOGIT_SCALE_INIT, L.SIGLIP_LOGIT_BIAS_INIT),
    "siglip_at_clamp": ("siglip", L.LOGIT_SCALE_MAX, -5.0),
    "siglip_lowest": ("siglip", L.LOGIT_SCALE_MIN, 2.0),
}


def _learned_call(name: str, S, t, b, mask, reduction: str = "sum"):
    if name == "clip_learned":
        return L.clip_learned(S, t, reduction, pos_mask=mask)
    return L.siglip(S, t, b, "mean" if reduction == "sum" else reduction, pos_mask=mask)  # the paper's 1/N


def _learned_ref(name: str, S, t, b, pos):
    return ref.clip_learned(S, t, pos) if name == "clip_learned" else ref.siglip(S, t, b, pos)


def _values_and_grads(fn, S, t, b, dtype=torch.float64, device="cpu"):
    """fn(S, t, b) and its gradients w.r.t. S, t and b (b None: no bias), all leaves of `dtype` on `device`."""
    scalars = [torch.tensor(x, dtype=torch.float64) for x in (t, 0.0 if b is None else b)]
    leaves = [x.detach().to(device=device, dtype=dtype).requires_grad_() for x in (S, *scalars)]
    value = fn(leaves[0], leaves[1], None if b is None else leaves[2])
    wrt = leaves if b is not None else leaves[:2]
    return value.detach(), torch.autograd.grad(value, wrt)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mask_name", MASKS)
@pytest.mark.parametrize("case", LEARNED)
def test_learned_scalars_value_and_gradients_match_reference(case, mask_name, dtype, device):
    """Value and dL/dS, dL/dt' (and dL/db) against the float64 loops, with t' and b as tensors requiring grad."""
    name, t, b = LEARNED[case]
    mask = MASKS[mask_name]
    S = random_S(6, seed=20)
    v_ref, g_ref = _values_and_grads(lambda X, u, c: _learned_ref(name, X, u, c, ref.as_lists(mask, 6, 6)), S, t, b)
    on = None if mask is None else mask.to(device)
    v, g = _values_and_grads(lambda X, u, c: _learned_call(name, X, u, c, on), S, t, b, dtype, device)
    assert v.dtype == dtype and all(x.dtype == dtype and x.device.type == device for x in g)
    torch.testing.assert_close(v.cpu().double(), v_ref, **TOLERANCE[dtype])
    for ours, theirs in zip(g, g_ref):
        torch.testing.assert_close(ours.cpu().double(), theirs, **TOLERANCE[dtype])


@pytest.mark.parametrize("mask_name", MASKS)
@pytest.mark.parametrize("case", LEARNED)
def test_learned_scalars_gradcheck(case, mask_name):
    name, t, b = LEARNED[case]
    t = min(max(t, 0.01), L.LOGIT_SCALE_MAX - 0.01)  # finite differences step both ways: stay inside the clamp
    mask = MASKS[mask_name]
    S = random_S(6, seed=21)
    t_ = torch.tensor(t, dtype=torch.float64, requires_grad=True)
    b_ = torch.tensor(0.0 if b is None else b, dtype=torch.float64, requires_grad=True)
    fn = lambda X, u, c: _learned_call(name, X, u, None if b is None else c, mask)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (S, t_, b_), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("reduction", ["sum", "mean", "none"])
@pytest.mark.parametrize("mask_name", MASKS)
@pytest.mark.parametrize("tau", [0.01, 0.07, 0.5, 1.0])
def test_clip_learned_is_info_nce_at_the_learned_temperature(tau, mask_name, reduction):
    """One formula: clip_learned(S, log(1/tau)) is info_nce(S, tau), value and dL/dS, for every reduction."""
    mask = MASKS[mask_name]
    S = random_S(6, seed=22)
    a = L.clip_learned(S, torch.tensor(math.log(1 / tau), dtype=torch.float64), reduction, pos_mask=mask)
    b = L.info_nce(S, tau, reduction, pos_mask=mask)
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    ga, gb = (torch.autograd.grad(x.sum(), S)[0] for x in (a, b))
    torch.testing.assert_close(ga, gb, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mask_name", MASKS)
@pytest.mark.parametrize("case", LEARNED)
def test_learned_scalar_gradients_are_sums_over_S(case, mask_name):
    """L depends on S only through t S + b, so dL/dt' = sum_ij s_ij dL/ds_ij and dL/db = sum_ij dL/ds_ij / t."""
    name, t, b = LEARNED[case]
    S = random_S(6, seed=23)
    _, (g_S, g_t, *g_b) = _values_and_grads(lambda X, u, c: _learned_call(name, X, u, c, MASKS[mask_name]), S, t, b)
    torch.testing.assert_close(g_t, (S.detach() * g_S).sum())
    if b is not None:
        torch.testing.assert_close(g_b[0], g_S.sum() / math.exp(t))


def test_siglip_gradient_is_the_hand_derived_one():
    """d/ds_ij of -(1/N) sum log sigmoid(z (t s + b)) = (t/N) (sigmoid(t s_ij + b) - [positive]), by autograd."""
    S, mask = random_S(6, seed=24), repeated_image_mask()
    t, b = 7.0, -2.0
    (grad,) = torch.autograd.grad(L.siglip(S, math.log(t), b, pos_mask=mask), S)
    expected = t / 6 * (torch.sigmoid(t * S.detach() + b) - mask.double())
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-14)


def test_siglip_sum_and_mean_are_over_images():
    """The paper's 1/n is the number of images: 'none' is one value per image row, 'mean' divides by the rows."""
    S, mask = random_S(3, 15, seed=25).detach(), five_caption_mask(3)
    per_image = L.siglip(S, 1.0, -1.0, "none", pos_mask=mask)
    assert per_image.shape == (3,)
    torch.testing.assert_close(L.siglip(S, 1.0, -1.0, "sum", pos_mask=mask), per_image.sum())
    torch.testing.assert_close(L.siglip(S, 1.0, -1.0, "mean", pos_mask=mask), per_image.sum() / 3)
    # the two directions are the same 45 binary terms: S.T sums them again, divided by its 15 rows
    torch.testing.assert_close(L.siglip(S.T, 1.0, -1.0, "sum", pos_mask=mask.T), per_image.sum())


def test_reductions_relate_for_the_learned_losses():
    S = random_S(6, seed=26).detach()
    for fn in (L.clip_learned, L.siglip):
        per = fn(S, reduction="none")
        assert per.shape == (6,)
        torch.testing.assert_close(fn(S, reduction="sum"), per.sum())
        torch.testing.assert_close(fn(S, reduction="mean"), per.mean())


@pytest.mark.parametrize("sign", [-1, 1])
def test_siglip_large_bias_limits(sign):
    """b -> -inf (t fixed): every pair is called "no match"; negatives cost nothing and stop getting gradient,
    L + b P/N -> -(t/N) sum_pos s. b -> +inf: the mirror image, only negatives cost and get t/N each."""
    S, mask = random_S(6, seed=27), repeated_image_mask()
    t, b, n, pos = 3.0, sign * 1e3, 6, mask.double()
    value = L.siglip(S, math.log(t), b, pos_mask=mask)
    (grad,) = torch.autograd.grad(value, S)
    if sign < 0:
        expected = -(t * S.detach() + b)[mask].sum() / n
        expected_grad = -t / n * pos
    else:
        expected = (t * S.detach() + b)[~mask].sum() / n
        expected_grad = t / n * (1 - pos)
    torch.testing.assert_close(value.detach(), expected, rtol=1e-14, atol=0)
    torch.testing.assert_close(grad, expected_grad, rtol=0, atol=1e-300)


@pytest.mark.parametrize("fn", [lambda S: L.clip_learned(S, L.LOGIT_SCALE_MAX),
                                lambda S: L.siglip(S, L.LOGIT_SCALE_MAX, L.SIGLIP_LOGIT_BIAS_INIT),
                                lambda S: L.siglip(S, L.LOGIT_SCALE_MAX, 0.0)],
                         ids=["clip_learned", "siglip", "siglip_no_bias"])
@pytest.mark.parametrize("batch", ["random", "worst"])
def test_finite_at_the_clamp_in_float32(fn, batch):
    """t = 100, the largest scale the clamp allows, on the worst batch (positives -1, negatives +1): finite in float32,
    and equal to float64."""
    S = random_S(64, seed=28).detach() if batch == "random" else 1 - 2 * torch.eye(64, dtype=torch.float64)
    S32 = S.float().requires_grad_()
    value = fn(S32)
    (grad,) = torch.autograd.grad(value, S32)
    assert torch.isfinite(value) and torch.isfinite(grad).all()
    torch.testing.assert_close(value.double(), fn(S), rtol=1e-5, atol=1e-5)


def test_clamp_logit_scale_is_open_clips_clamp():
    for start, end in [(7.0, math.log(100)), (-1.0, 0.0), (2.0, 2.0)]:
        p = torch.nn.Parameter(torch.tensor(start))
        assert L.clamp_logit_scale_(p) is p and p.requires_grad and p.grad_fn is None
        assert float(p.detach()) == float(torch.tensor(end))  # the bound as float32 stores it
    # a float32 parameter clamped at log 100 rounds above the float64 bound, and is still accepted
    p = L.clamp_logit_scale_(torch.tensor(9.0))
    assert float(p) > L.LOGIT_SCALE_MAX
    L.clip_learned(random_S(4).detach(), p)
    L.siglip(random_S(4).detach(), p, -10.0)
    with pytest.raises(ValueError, match="logit_scale contains NaN"):
        L.clamp_logit_scale_(torch.tensor(math.nan))
    with pytest.raises(TypeError, match="logit_scale"):
        L.clamp_logit_scale_(4.0)


LEARNED_LOSSES = {"clip_learned": L.clip_learned, "siglip": L.siglip}


@pytest.mark.parametrize("name", LEARNED_LOSSES)
@pytest.mark.parametrize("S, match", BAD)
def test_learned_losses_bad_similarity(name, S, match):
    with pytest.raises(ValueError, match=match):
        LEARNED_LOSSES[name](S)


@pytest.mark.parametrize("name", LEARNED_LOSSES)
@pytest.mark.parametrize(
    "logit_scale, error",
    [(math.nan, ValueError), (math.inf, ValueError), (torch.tensor(math.nan), ValueError),
     (torch.tensor(-math.inf), ValueError), (-0.01, ValueError), (math.log(100) + 1e-6, ValueError),
     (torch.tensor(5.0), ValueError), (torch.tensor(-0.5, dtype=torch.float64), ValueError),
     (torch.tensor([1.0]), ValueError), (torch.tensor(2), TypeError), (True, TypeError), ("2.0", TypeError)],
)
def test_bad_logit_scale(name, logit_scale, error):
    """Not finite, or outside the clamp [0, log 100] (an initial scale too): an error naming logit_scale."""
    with pytest.raises(error, match="^logit_scale"):
        LEARNED_LOSSES[name](torch.rand(4, 4), logit_scale)


@pytest.mark.parametrize("logit_bias", [math.nan, -math.inf, torch.tensor(math.inf), torch.tensor([0.0]), None])
def test_bad_logit_bias(logit_bias):
    with pytest.raises((ValueError, TypeError), match="^logit_bias"):
        L.siglip(torch.rand(4, 4), 1.0, logit_bias)


@pytest.mark.parametrize("name", LEARNED_LOSSES)
def test_learned_losses_bad_pos_mask_and_reduction(name):
    fn, S = LEARNED_LOSSES[name], torch.rand(4, 4)
    with pytest.raises(ValueError, match="pos_mask must have the shape"):
        fn(S, pos_mask=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="pos_mask has a column without positives"):
        fn(torch.rand(2, 3), pos_mask=torch.tensor([[True, False, False], [False, True, False]]))
    with pytest.raises(ValueError, match="reduction"):
        fn(S, reduction="avg")


def test_learned_losses_overflow_names_the_parameter():
    """FloatingPointError names the parameter, never S: a bias of -3e38 overflows the float32 sum; so does a scale
    of e^{t'} on scores far outside the cosine range."""
    S = random_S(4, seed=29).detach().float()
    with pytest.raises(FloatingPointError, match="logit_bias=-3e\\+38 is too large in magnitude") as err:
        L.siglip(S, 1.0, -3e38, "sum")
    assert " S" not in str(err.value)
    huge = S * 1e37
    for call in (lambda: L.clip_learned(huge, L.LOGIT_SCALE_MAX), lambda: L.siglip(huge, L.LOGIT_SCALE_MAX, 0.0)):
        with pytest.raises(FloatingPointError, match="logit_scale=4.60517 is too large") as err:
            call()
        assert " S" not in str(err.value)


def test_learned_losses_skip_value_checks_inside_validated():
    """The trainer's step loop (vlr_lib._checks.validated) never waits for the device: a tensor t' is not read."""
    from vlr_lib._checks import validated

    S = random_S(4, seed=30).detach()
    with validated():
        L.clip_learned(S, torch.tensor(5.0))  # outside the clamp, not read
        L.siglip(S, torch.tensor(1.0), torch.tensor(-1.0))
    with pytest.raises(ValueError, match="logit_scale"):
        L.clip_learned(S, torch.tensor(5.0))
