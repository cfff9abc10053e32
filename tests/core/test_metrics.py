"""Tests of vlr_lib.metrics: R@K both ways, rsum, mAP@k, PR-AUC / PR curve.

References here are written from the definitions with plain Python loops in
float64 (sort every query's candidates, walk the ranked list), independent of
the counting / bucketing used by the library.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from hypothesis import given, settings
from hypothesis import strategies as st

from vlr_lib import metrics
from vlr_lib.metrics import map_at_k, pr_auc, pr_curve, ranks_i2t, ranks_t2i, retrieval_metrics

# ---------------------------------------------------------------- hand-worked
# 3 images x 15 captions; captions 0-4 describe image 0, 5-9 image 1, 10-14 image 2.
HAND_C2I = [0] * 5 + [1] * 5 + [2] * 5
HAND_S = [
    #  captions of image 0          captions of image 1           captions of image 2
    [0.9, 0.5, 0.5, 0.1, 0.1, 0.9, 0.7, 0.2, 0.2, 0.0, 0.6, 0.3, 0.0, 0.0, 0.0],
    [0.8, 0.8, 0.3, 0.0, 0.1, 0.8, 0.6, 0.6, 0.6, 0.1, 0.9, 0.0, 0.0, 0.0, 0.0],
    [0.4, 0.0, 0.0, 0.0, 0.0, 0.95, 0.0, 0.0, 0.0, 0.0, 0.7, 0.7, 0.4, 0.3, 0.2],
]
# Ties: a negative scoring the same as the positive ranks before it (the module's convention).
# i2t ranks (1 + #negative captions scoring >= the image's best caption):
#   image 0: best 0.9 (cap 0); cap 5 ties at 0.9 -> rank 2
#   image 1: best 0.8 (cap 5); cap 10 (0.9) above, caps 0, 1 tie at 0.8 -> rank 4
#   image 2: best 0.7 (caps 10, 11, both its own: no penalty); cap 5 (0.95) above -> rank 2
HAND_I2T = [2, 4, 2]
# t2i ranks (column c, 1 + #other images scoring >= the true image):
#   c0 [.9 .8 .4] 1 | c1 [.5 .8 0] 2 | c2 [.5 .3 0] 1 | c3 [.1 0 0] 1 | c4 [.1 .1 0] 2 (tie)
#   c5 [.9 .8 .95] 3 | c6 [.7 .6 0] 2 | c7, c8 [.2 .6 0] 1 | c9 [0 .1 0] 1
#   c10 [.6 .9 .7] 2 | c11 [.3 0 .7] 1 | c12-c14 1
HAND_T2I = [1, 2, 1, 1, 2, 3, 2, 1, 1, 1, 2, 1, 1, 1, 1]
# mAP@5, tied negatives placed before the image's own captions:
#   image 0: 0.9 c5, 0.9 c0 (pos 2: 1/2), 0.7, 0.6, 0.5 c1 (pos 5: 2/5) -> (1/2 + 2/5) / 5 = 0.18
#   image 1: 0.9 c10, 0.8 c0, 0.8 c1, 0.8 c5 (pos 4: 1/4), 0.6 c6 (pos 5: 2/5) -> 0.65 / 5 = 0.13
#   image 2: 0.95 c5, 0.7 c10 (1/2), 0.7 c11 (2/3), 0.4 c0, 0.4 c12 (pos 5: 3/5)
#            -> (1/2 + 2/3 + 3/5) / 5 = 53/150   (eq. 6 read literally would give c11 1/2)
HAND_MAP5 = (Fraction(18, 100) + Fraction(13, 100) + Fraction(53, 150)) / 3
# Global PR over the 45 pairs (15 positives), at each distinct positive score t:
#   t     0.9  0.8  0.7   0.6   0.5   0.4    0.3    0.2    0.1
#   TP     1    2    4     7     9    10     11     12     15
#   FP     3    5    6     7     7     8     10     12     13
HAND_TP = [1, 2, 4, 7, 9, 10, 11, 12, 15]
HAND_FP = [3, 5, 6, 7, 7, 8, 10, 12, 13]


def _hand(dtype=torch.float64):
    return torch.tensor(HAND_S, dtype=dtype), torch.tensor(HAND_C2I)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_hand_worked_ranks_and_recalls(dtype):
    S, c2i = _hand(dtype)
    assert ranks_i2t(S, c2i).tolist() == HAND_I2T
    assert ranks_t2i(S, c2i).tolist() == HAND_T2I
    out = retrieval_metrics(S, c2i, ks=(1, 2, 3))
    # i2t: no image at rank 1, 2 of 3 by rank 2 and 3; t2i: 10/15 at rank 1, 14/15 by 2, 15/15 by 3
    expected = {"i2t_r1": 0.0, "i2t_r2": 200 / 3, "i2t_r3": 200 / 3,
                "t2i_r1": 1000 / 15, "t2i_r2": 1400 / 15, "t2i_r3": 100.0,
                "rsum": 400 / 3 + 1000 / 15 + 1400 / 15 + 100.0}
    assert out.keys() == expected.keys()
    for key, value in expected.items():
        assert isinstance(out[key], float)
        assert out[key] == pytest.approx(value, abs=1e-9), key


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_hand_worked_map_and_pr(dtype):
    S, c2i = _hand(dtype)
    assert map_at_k(S, c2i, k=5) == pytest.approx(float(HAND_MAP5), abs=1e-12)
    precision, recall = pr_curve(S, c2i)
    exp_p = [tp / (tp + fp) for tp, fp in zip(HAND_TP, HAND_FP)]
    exp_r = [tp / 15 for tp in HAND_TP]
    assert precision.tolist() == pytest.approx(exp_p, abs=1e-12)
    assert recall.tolist() == pytest.approx(exp_r, abs=1e-12)
    steps = [b - a for a, b in zip([0] + HAND_TP, HAND_TP)]
    auc = sum(Fraction(d, 15) * Fraction(tp, tp + fp) for d, tp, fp in zip(steps, HAND_TP, HAND_FP))
    assert pr_auc(S, c2i) == pytest.approx(float(auc), abs=1e-12)


def test_hand_worked_map_other_k():
    S, c2i = _hand()
    # k=1: every image has a negative at or above its best caption -> 0
    assert map_at_k(S, c2i, k=1) == 0.0
    # k=3: image 0 -> (1/2)/3; image 1 -> 0 (first caption at position 4); image 2 -> (1/2 + 2/3)/3
    assert map_at_k(S, c2i, k=3) == pytest.approx((1 / 6 + 0 + (1 / 2 + 2 / 3) / 3) / 3)


# ------------------------------------------------------- slow loop references
# Every reference sorts the whole list and breaks ties *against* the query: a negative
# tied with a positive is placed first (the module's convention).
def ref_ranks_i2t(S, c2i):
    S = S.double().tolist()
    out = []
    for i, row in enumerate(S):
        order = sorted(range(len(row)), key=lambda c: (-row[c], c2i[c] == i))  # ties: own captions last
        out.append(1 + next(r for r, c in enumerate(order) if c2i[c] == i))
    return out


def ref_ranks_t2i(S, c2i):
    S = S.double().tolist()
    out = []
    for c, img in enumerate(c2i):
        col = [S[i][c] for i in range(len(S))]
        order = sorted(range(len(col)), key=lambda i: (-col[i], i == img))
        out.append(1 + order.index(img))
    return out


def ref_map_at_k(S, c2i, k):
    S = S.double().tolist()
    aps = []
    for i, row in enumerate(S):
        order = sorted(range(len(row)), key=lambda c: (-row[c], c2i[c] == i))
        hits, total = 0, 0.0
        for r, c in enumerate(order[:k], start=1):
            if c2i[c] == i:
                hits += 1
                total += hits / r
        aps.append(total / min(k, sum(1 for x in c2i if x == i)))
    return sum(aps) / len(aps)


def ref_pr_auc(S, c2i):
    S = S.double().tolist()
    pairs = sorted(((S[i][c], c2i[c] == i) for i in range(len(S)) for c in range(len(c2i))), reverse=True)
    n_pos = sum(lab for _, lab in pairs)
    tp = fp = 0
    auc, j = 0.0, 0
    while j < len(pairs):  # one threshold per distinct score: tied pairs enter together
        score, new_tp = pairs[j][0], 0
        while j < len(pairs) and pairs[j][0] == score:
            new_tp += pairs[j][1]
            fp += not pairs[j][1]
            j += 1
        tp += new_tp
        auc += new_tp / n_pos * tp / (tp + fp)
    return auc


def _random_case(seed, n_images, n_captions, layout, ties):
    g = torch.Generator().manual_seed(seed)
    if layout == "blocked":
        c2i = torch.arange(n_captions) // (n_captions // n_images)
    else:  # every image gets >= 1 caption, the rest at random, shuffled
        extra = torch.randint(0, n_images, (n_captions - n_images,), generator=g)
        c2i = torch.cat([torch.arange(n_images), extra])[torch.randperm(n_captions, generator=g)]
    S = torch.rand(n_images, n_captions, generator=g)
    if ties:  # 6 levels: many exact ties between and within positives and negatives
        S = (S * 6).floor() / 6
    return S, c2i


CASES = [(0, 12, 60, "blocked", False), (1, 12, 60, "blocked", True),
         (2, 9, 40, "irregular", False), (3, 9, 40, "irregular", True), (4, 15, 15, "blocked", True)]


@pytest.mark.parametrize("seed,n,m,layout,ties", CASES)
def test_against_loop_reference(seed, n, m, layout, ties):
    S, c2i = _random_case(seed, n, m, layout, ties)
    c2l = c2i.tolist()
    r_i2t, r_t2i = ref_ranks_i2t(S, c2l), ref_ranks_t2i(S, c2l)
    assert ranks_i2t(S, c2i).tolist() == r_i2t
    assert ranks_t2i(S, c2i).tolist() == r_t2i
    ks = (1, 3, min(n, 10))
    out = retrieval_metrics(S, c2i, ks=ks, chunk_size=5)
    for k in ks:
        assert out[f"i2t_r{k}"] == pytest.approx(100 * np.mean([r <= k for r in r_i2t]))
        assert out[f"t2i_r{k}"] == pytest.approx(100 * np.mean([r <= k for r in r_t2i]))
    for k in (1, 5, 12):
        assert map_at_k(S, c2i, k=k, chunk_size=4) == pytest.approx(ref_map_at_k(S, c2l, k), abs=1e-12)
    assert pr_auc(S, c2i, chunk_size=3) == pytest.approx(ref_pr_auc(S, c2l), abs=1e-12)


@pytest.mark.parametrize("seed,n,m,layout,ties", CASES)
def test_pr_auc_matches_sklearn(seed, n, m, layout, ties):
    skm = pytest.importorskip("sklearn.metrics", reason="scikit-learn not installed (optional test oracle)")
    S, c2i = _random_case(seed, n, m, layout, ties)
    labels = (c2i[None, :] == torch.arange(n)[:, None]).numpy().ravel()
    expected = skm.average_precision_score(labels, S.double().numpy().ravel())
    assert pr_auc(S, c2i) == pytest.approx(expected, abs=1e-12)
    precision, recall = pr_curve(S, c2i)
    sk_p, sk_r, _ = skm.precision_recall_curve(labels, S.double().numpy().ravel())
    # sklearn lists every threshold (recall decreasing, plus (1, 0)); ours keeps the
    # thresholds where recall grows, which are sklearn's points with a new recall value.
    keep = np.r_[sk_r[:-1] != sk_r[1:], False]
    assert recall.numpy() == pytest.approx(sk_r[keep][::-1])
    assert precision.numpy() == pytest.approx(sk_p[keep][::-1])


# ------------------------------------------------------------------ invariance
def _all_metrics(S, c2i, chunk_size):
    return (ranks_i2t(S, c2i, chunk_size=chunk_size).tolist(),
            ranks_t2i(S, c2i, chunk_size=chunk_size).tolist(),
            retrieval_metrics(S, c2i, ks=(1, 5, 10), chunk_size=chunk_size),
            map_at_k(S, c2i, k=5, chunk_size=chunk_size),
            pr_auc(S, c2i, chunk_size=chunk_size),
            [t.tolist() for t in pr_curve(S, c2i, chunk_size=chunk_size)])


@pytest.mark.parametrize("ties", [False, True])
def test_chunk_size_invariance(ties):
    S, c2i = _random_case(5, 23, 115, "irregular", ties)
    reference = _all_metrics(S, c2i, chunk_size=23)
    for chunk in (1, 7, 10**6):
        assert _all_metrics(S, c2i, chunk_size=chunk) == reference


def test_permutation_invariance():
    # Relabelling images and shuffling captions must not change any metric.
    S, c2i = _random_case(6, 10, 50, "irregular", True)
    img_perm, cap_perm = torch.randperm(10), torch.randperm(50)
    inv = torch.argsort(img_perm)  # new image index of old image i
    S2 = S[img_perm][:, cap_perm]
    c2i2 = inv[c2i[cap_perm]]
    a, b = _all_metrics(S, c2i, 4), _all_metrics(S2, c2i2, 4)
    assert sorted(a[0]) == sorted(b[0]) and sorted(a[1]) == sorted(b[1])
    assert a[2] == pytest.approx(b[2]) and a[3] == pytest.approx(b[3]) and a[4] == pytest.approx(b[4])


def test_inputs_numpy_list_and_grad():
    S, c2i = _random_case(7, 8, 40, "blocked", False)
    expected = retrieval_metrics(S, c2i, ks=(1, 5))
    assert retrieval_metrics(S.numpy(), c2i.numpy(), ks=(1, 5)) == expected
    assert retrieval_metrics(S, c2i.tolist(), ks=[1, 5]) == expected
    assert retrieval_metrics(S, c2i.to(torch.int32), ks=(np.int64(1), 5)) == expected
    leaf = S.clone().requires_grad_(True)
    assert retrieval_metrics(leaf, c2i, ks=(1, 5)) == expected
    assert map_at_k(leaf, c2i) == map_at_k(S, c2i) and pr_auc(leaf, c2i) == pr_auc(S, c2i)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    S, c2i = _random_case(8, 40, 200, "irregular", True)
    cpu = _all_metrics(S, c2i, 16)
    gpu = _all_metrics(S.cuda(), c2i.cuda(), 16)
    assert gpu[0] == cpu[0] and gpu[1] == cpu[1] and gpu[2] == cpu[2]
    assert gpu[3] == pytest.approx(cpu[3], abs=1e-12) and gpu[4] == pytest.approx(cpu[4], abs=1e-12)


# ------------------------------------------------------ extreme and chance values
N_IMG, PER = 20, 5  # 100 captions


def _mask():
    c2i = torch.arange(N_IMG * PER) // PER
    return (c2i[None, :] == torch.arange(N_IMG)[:, None]).double(), c2i


def test_perfect_scores():
    mask, c2i = _mask()
    S = mask + 0.5 * torch.rand(mask.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    out = retrieval_metrics(S, c2i)
    assert all(v == 100.0 for k, v in out.items() if k != "rsum") and out["rsum"] == 600.0
    assert map_at_k(S, c2i, k=5) == 1.0 and map_at_k(S, c2i, k=10) == 1.0
    assert pr_auc(S, c2i) == pytest.approx(1.0)


def test_reversed_scores():
    mask, c2i = _mask()
    S = -mask  # every positive scores below every negative
    # i2t: all 95 negatives above the best caption -> rank 96; t2i: 19 images above -> rank 20
    assert ranks_i2t(S, c2i).tolist() == [96] * N_IMG
    assert ranks_t2i(S, c2i).tolist() == [20] * (N_IMG * PER)
    out = retrieval_metrics(S, c2i, ks=(1, 10, 20))
    assert out == {"i2t_r1": 0.0, "i2t_r10": 0.0, "i2t_r20": 0.0,
                   "t2i_r1": 0.0, "t2i_r10": 0.0, "t2i_r20": 100.0, "rsum": 100.0}
    assert map_at_k(S, c2i, k=5) == 0.0
    # one threshold (-1) reaching every pair: precision = 100 / 2000 = 1 / n_images
    assert pr_auc(S, c2i) == pytest.approx(1 / N_IMG)



@pytest.mark.parametrize("value", [0.0, 0.37, -1.0])
@pytest.mark.parametrize("n_images, per_image", [(20, 5), (50, 5), (7, 1)])
def test_constant_scores_never_look_good(value, n_images, per_image):
    """A collapsed model (every score equal) gets R@K = 0 and mAP@k = 0, and PR-AUC at the base rate."""
    c2i = torch.arange(n_images * per_image) // per_image
    S = torch.full((n_images, n_images * per_image), value)
    n_captions = n_images * per_image
    assert ranks_i2t(S, c2i).tolist() == [n_captions - per_image + 1] * n_images  # every negative ties
    assert ranks_t2i(S, c2i).tolist() == [n_images] * n_captions
    out = retrieval_metrics(S, c2i, ks=(1, 5))
    assert set(out.values()) == {0.0}
    assert map_at_k(S, c2i, k=5) == 0.0
    assert metrics.average_precision(S[0], c2i == 0) == pytest.approx(
        sum((b + 1) / (n_captions - per_image + 1 + b) for b in range(per_image)) / per_image)
    assert pr_auc(S, c2i) == pytest.approx(1 / n_images)  # one threshold accepts every pair: the base rate


def test_collapsed_embeddings_score_zero():
    """Zeroed projection heads with a bias map every input to the same vector: S is constant."""
    from vlr_lib.similarity import similarity

    bias = torch.randn(16, generator=torch.Generator().manual_seed(0))
    img, txt = bias.expand(30, 16), bias.expand(150, 16)
    S = similarity(img, txt)
    assert retrieval_metrics(S, torch.arange(150) // 5)["rsum"] == 0.0


def _strict_ranks_and_ties(S: np.ndarray, c2i: np.ndarray):
    """The strictly-higher count (the convention this module does not use) and the negatives tied per query."""
    own = c2i[None, :] == np.arange(S.shape[0])[:, None]
    best = np.where(own, S, -np.inf).max(axis=1)
    pos = S[c2i, np.arange(c2i.size)]
    strict = (1 + ((S > best[:, None]) & ~own).sum(axis=1), 1 + ((S > pos[None, :]) & ~own).sum(axis=0))
    ties = (((S == best[:, None]) & ~own).sum(axis=1), ((S == pos[None, :]) & ~own).sum(axis=0))
    return strict, ties


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_images=st.integers(2, 7), per_image=st.integers(1, 4),
       levels=st.one_of(st.none(), st.integers(1, 5)))
def test_pessimistic_rank_property(seed, n_images, per_image, levels):
    """rank = strict rank + the negatives tied with the positive: >= strict, equal without ties."""
    g = torch.Generator().manual_seed(seed)
    c2i = torch.arange(n_images * per_image) // per_image
    S = torch.rand(n_images, n_images * per_image, generator=g, dtype=torch.float64)
    if levels is not None:  # inject ties: a few score levels only
        S = (S * levels).floor() / levels
    (strict_i2t, strict_t2i), (ties_i2t, ties_t2i) = _strict_ranks_and_ties(S.numpy(), c2i.numpy())
    r_i2t, r_t2i = ranks_i2t(S, c2i, chunk_size=3).numpy(), ranks_t2i(S, c2i, chunk_size=3).numpy()
    np.testing.assert_array_equal(r_i2t, strict_i2t + ties_i2t)
    np.testing.assert_array_equal(r_t2i, strict_t2i + ties_t2i)
    assert (r_i2t >= strict_i2t).all() and (r_t2i >= strict_t2i).all()
    if levels is None:  # continuous scores never tie: the two conventions agree exactly
        assert ties_i2t.sum() == ties_t2i.sum() == 0


# ------------------------------------------------------------------ bad inputs
def test_bad_scores():
    _, c2i = _hand()
    with pytest.raises(TypeError, match="S_eval"):
        retrieval_metrics(HAND_S, c2i, ks=(1,))
    with pytest.raises(ValueError, match="S_eval"):
        retrieval_metrics(torch.rand(15), c2i, ks=(1,))
    with pytest.raises(TypeError, match="S_eval"):
        map_at_k(torch.ones(3, 15, dtype=torch.long), c2i)
    bad = torch.rand(3, 15)
    bad[2, 7] = float("nan")
    with pytest.raises(ValueError, match="S_eval"):
        pr_auc(bad, c2i, chunk_size=1)
    bad[2, 7] = float("inf")
    with pytest.raises(ValueError, match="S_eval"):
        ranks_t2i(bad, c2i)
    with pytest.raises(ValueError, match="S_eval"):
        ranks_i2t(torch.rand(0, 15), c2i)


def test_bad_caption_to_image():
    S, c2i = _hand()
    with pytest.raises(ValueError, match="caption_to_image"):
        retrieval_metrics(S, c2i[:14], ks=(1,))
    with pytest.raises(ValueError, match="caption_to_image"):
        retrieval_metrics(S, c2i[None, :], ks=(1,))
    with pytest.raises(TypeError, match="caption_to_image"):
        map_at_k(S, c2i.double())
    with pytest.raises(TypeError, match="caption_to_image"):
        map_at_k(S, c2i == 0)
    with pytest.raises(TypeError, match="caption_to_image"):
        pr_auc(S, [0.0] * 15)
    with pytest.raises(TypeError, match="caption_to_image"):
        pr_auc(S, "0" * 15)
    for value in (-1, 3):
        c = c2i.clone()
        c[4] = value
        with pytest.raises(ValueError, match="caption_to_image"):
            ranks_i2t(S, c)
    no_caption = torch.tensor([0] * 10 + [2] * 5)  # image 1 has no caption
    with pytest.raises(ValueError, match="caption_to_image.*image 1"):
        ranks_t2i(S, no_caption)


def test_bad_ks_k_chunk():
    S, c2i = _hand()
    for ks in ((0,), (1, 4), (1, 1)):  # 4 > 3 candidate images
        with pytest.raises(ValueError, match="ks"):
            retrieval_metrics(S, c2i, ks=ks)
    with pytest.raises(ValueError, match="ks"):
        retrieval_metrics(S, c2i)  # the default (1, 5, 10) needs >= 10 images
    for ks in ((), 5, (1.0,), (True,), None):
        with pytest.raises(TypeError, match="ks"):
            retrieval_metrics(S, c2i, ks=ks)
    with pytest.raises(ValueError, match="^k "):
        map_at_k(S, c2i, k=0)
    with pytest.raises(TypeError, match="^k "):
        map_at_k(S, c2i, k=2.5)
    for f in (ranks_i2t, ranks_t2i, map_at_k, pr_auc, pr_curve):
        with pytest.raises(ValueError, match="chunk_size"):
            f(S, c2i, chunk_size=0)
    with pytest.raises(TypeError, match="chunk_size"):
        retrieval_metrics(S, c2i, ks=(1,), chunk_size=1.5)


def test_map_k_larger_than_candidates():
    S, c2i = _hand()
    # k beyond the 15 captions: the whole list counts, normaliser min(k, 5) = 5
    assert map_at_k(S, c2i, k=100) == pytest.approx(ref_map_at_k(S, HAND_C2I, 100), abs=1e-12)


# -------------------------------------------------------------- memory bound
# Peak RSS (VmHWM) of a fresh process (torch memory is invisible to tracemalloc). A full-size
# temporary of the n x m matrix as float32 or int64 (a copy, an argsort) adds >= 4 n m
# bytes; the chunked code must stay below half of that. A control run of
# retrieval_metrics with chunk_size = n (one block: full-size temporaries) must exceed
# it, so the measurement itself is shown to work.
# 5,000 x 25,000 (COCO 5K) takes ~20 s on the 2-core CI machine, mostly PR-AUC; opt in with
# VLR_BIG_EVAL=1. The default size still tells a chunked working set from a full-size one.
MEM_N, MEM_M = (5000, 25000) if os.environ.get("VLR_BIG_EVAL") == "1" else (2000, 10000)
_MEM_SCRIPT = textwrap.dedent(
    """
    import json, sys, time, torch
    from vlr_lib import metrics as m
    torch.set_num_threads(1)  # this measures memory; one thread keeps it quick on a busy machine
    n, mm = int(sys.argv[1]), int(sys.argv[2])
    fns = {"retrieval_metrics": m.retrieval_metrics, "map_at_k": m.map_at_k, "pr_auc": m.pr_auc}
    for f in fns.values():  # warm up code paths, allocator and thread pools on a small case
        f(torch.rand(40, 200), torch.arange(200) // 5)
    S = torch.empty(n, mm).uniform_(generator=torch.Generator().manual_seed(0))
    c2i = torch.arange(mm) // (mm // n)

    def peak():  # VmHWM of this process's own memory map (ru_maxrss would carry the parent's over exec)
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))

    def reset_peak():  # Linux >= 4.0: set VmHWM back to the current RSS; else peaks stay monotone
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass

    report = []
    for chunk, names in ((int(sys.argv[3]), list(fns)), (int(sys.argv[4]), ["retrieval_metrics"])):
        reset_peak()
        base, row = peak(), {"chunk_size": chunk}  # without a reset the control still runs second
        for name in names:
            t = time.perf_counter()
            fns[name](S, c2i, chunk_size=chunk)
            row[name + "_s"] = round(time.perf_counter() - t, 2)
        row["extra_bytes"] = peak() - base
        report.append(row)
    print(json.dumps(report))
    """
)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads peak RSS from Linux /proc")
def test_peak_memory_is_chunk_bounded():
    root = Path(metrics.__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", _MEM_SCRIPT, str(MEM_N), str(MEM_M), "64", str(MEM_N)],
                          capture_output=True, text=True, cwd=root, timeout=300)
    assert proc.returncode == 0, proc.stderr
    chunked, control = json.loads(proc.stdout.strip().splitlines()[-1])
    print(chunked, control)
    bound = 2 * MEM_N * MEM_M  # 40 MB at 2,000 x 10,000
    assert chunked["extra_bytes"] < bound  # measured 5-16 MB at 2,000 x 10,000
    assert control["extra_bytes"] > bound  # measured ~140 MB at 2,000 x 10,000


# --------------------------------------------------------- one query's AP, thresholds
SCORES = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2])
IS_POS = np.array([1, 0, 1, 0, 0, 1, 0, 0], dtype=bool)  # positives at ranks 1, 3 and 6


def test_average_precision_hand_worked():
    # precision at the positives' ranks: 1/1, 2/3, 3/6
    assert metrics.average_precision(SCORES, IS_POS) == pytest.approx((1 + 2 / 3 + 3 / 6) / 3)
    assert metrics.average_precision(SCORES, np.arange(8) < 3) == 1.0
    for r in range(8):  # one positive at rank r + 1: AP = 1 / (r + 1)
        assert metrics.average_precision(torch.tensor(SCORES), torch.arange(8) == r) == pytest.approx(1 / (r + 1))
    # a negative tied with the second positive is ranked before it: 1/1, 2/4, 3/6
    tied = SCORES.copy()
    tied[3] = tied[2]
    assert metrics.average_precision(tied, IS_POS) == pytest.approx((1 + 2 / 4 + 3 / 6) / 3)
    assert metrics.average_precision(np.zeros(8), IS_POS) == pytest.approx((1 / 6 + 2 / 7 + 3 / 8) / 3)


@pytest.mark.parametrize("tau", [1.0, 0.1, 0.01])
def test_smooth_average_precision_from_the_paper(tau):
    """Bleeker & de Rijke eqs. 7-8 with loops: mean over positives i of (1 + sum_{j in P, j != i} G(s_j - s_i)) /
    (1 + sum_{j != i} G(s_j - s_i)), G the sigmoid of x / tau."""
    G = lambda x: 1 / (1 + math.exp(-x / tau))  # noqa: E731
    pos = np.flatnonzero(IS_POS)
    want = np.mean([(1 + sum(G(SCORES[j] - SCORES[i]) for j in pos if j != i))
                    / (1 + sum(G(SCORES[j] - SCORES[i]) for j in range(8) if j != i)) for i in pos])
    assert metrics.smooth_average_precision(SCORES, IS_POS, tau) == pytest.approx(want, rel=1e-12)


def test_smooth_average_precision_limit_and_errors():
    exact = metrics.average_precision(SCORES, IS_POS)
    assert metrics.smooth_average_precision(torch.tensor(SCORES, dtype=torch.float32), IS_POS, 1e-4) == \
        pytest.approx(exact, abs=1e-9)  # scores 0.1 apart: tau = 1e-4 is sharp
    assert abs(metrics.smooth_average_precision(SCORES, IS_POS, 1.0) - exact) > 0.05
    with pytest.raises(ValueError, match="tau"):
        metrics.smooth_average_precision(SCORES, IS_POS, 0.0)
    with pytest.raises(ValueError, match="is_pos"):
        metrics.smooth_average_precision(SCORES, IS_POS[:4], 0.1)


@pytest.mark.parametrize("seed,n,m,layout,ties", CASES)
def test_average_precision_is_map_at_full_depth(seed, n, m, layout, ties):
    S, c2i = _random_case(seed, n, m, layout, ties)
    ours = np.mean([metrics.average_precision(S[i], c2i == i) for i in range(n)])
    assert ours == pytest.approx(map_at_k(S, c2i, k=m), abs=1e-12)


def test_average_precision_bad_input():
    with pytest.raises(ValueError, match="is_pos"):
        metrics.average_precision(SCORES, np.zeros(8, dtype=bool))
    with pytest.raises(ValueError, match="is_pos"):
        metrics.average_precision(SCORES, IS_POS[:4])
    with pytest.raises(ValueError, match="scores"):
        metrics.average_precision(np.array([0.1, math.nan]), np.array([True, False]))


def slow_precision_recall(S, c2i, t):
    pairs = [(float(S[i, c]), int(c2i[c]) == i) for i in range(S.shape[0]) for c in range(S.shape[1])]
    accepted = [m for s, m in pairs if s >= t]
    n_pos = sum(m for _, m in pairs)
    return (sum(accepted) / len(accepted) if accepted else 1.0), sum(accepted) / n_pos


@pytest.mark.parametrize("t", [-2.0, 0.0, 0.25, 0.5, 0.6, 2.0])
def test_precision_recall_at_matches_slow_count(t):
    S, c2i = _random_case(1, 12, 60, "blocked", True)
    assert metrics.precision_recall_at(S, c2i, t, chunk_size=5) == pytest.approx(slow_precision_recall(S, c2i, t))


def test_precision_recall_at_is_a_point_of_the_pr_curve():
    S, c2i = _random_case(2, 9, 40, "irregular", False)
    precision, recall = pr_curve(S, c2i)
    thresholds = torch.unique(S[c2i, torch.arange(c2i.numel())]).flip(0)  # highest first, as pr_curve
    for j in (0, 5, len(thresholds) - 1):
        expected = (float(precision[j]), float(recall[j]))
        assert metrics.precision_recall_at(S, c2i, float(thresholds[j])) == pytest.approx(expected)
    with pytest.raises(ValueError, match="threshold"):
        metrics.precision_recall_at(S, c2i, math.inf)


@pytest.mark.parametrize("direction", ["t2i", "i2t"])
def test_neighbor_counts_match_loops(direction):
    S, _ = _random_case(3, 9, 40, "irregular", True)
    grid = np.linspace(-0.1, 1.1, 13)
    counts = metrics.neighbor_counts(S, grid, direction, chunk_size=4).numpy()
    rows = S.T if direction == "t2i" else S
    ref = [[sum(float(s) >= x for s in row) for x in grid] for row in rows]
    np.testing.assert_array_equal(counts, np.array(ref))
    assert (np.diff(counts, axis=1) <= 0).all() and (counts[:, 0] == rows.shape[1]).all()
    with pytest.raises(ValueError, match="direction"):
        metrics.neighbor_counts(S, grid, "both")


# --------------------------------------------------------------------------- the chance rsum


def test_chance_rsum_matches_exhaustive_random_rankings():
    """3 images x 2 captions: average R@K over every possible ranking (all equally likely by chance)."""
    c2i = [0, 0, 1, 1, 2, 2]
    ks = (1, 2)
    i2t = {k: 0.0 for k in ks}
    perms = list(itertools.permutations(range(6)))
    for perm in perms:  # ranking of captions for an image query: image i's captions' positions
        for i in range(3):
            best = min(perm.index(c) for c in range(6) if c2i[c] == i)
            for k in ks:
                i2t[k] += best < k
    i2t_r = sum(100 * i2t[k] / (len(perms) * 3) for k in ks)
    t2i_r = sum(100 * k / 3 for k in ks)  # one true image among 3
    assert metrics.chance_rsum(c2i, ks) == pytest.approx(i2t_r + t2i_r)


def test_chance_rsum_of_a_split_smaller_than_k_leaves_those_recalls_out():
    """A one-image validation split (vlr-train --n-val 1 died here with ZeroDivisionError after training)."""
    assert metrics.chance_rsum([0] * 5) == pytest.approx(200.0)  # R@1 both ways is certain; R@5 and R@10 do not exist
    assert metrics.chance_rsum([0, 0, 1, 1, 1]) == pytest.approx(50.0 + 50.0)  # K = 1 only: (0.4 + 0.6) / 2 and 1 / 2


# ---------------------------------------------------------------- the queries a figure shows (notebook 05)

def test_spaced_queries_are_evenly_spaced_and_hold_both_ends():
    assert metrics.spaced_queries(3, 11).tolist() == [0, 5, 10]
    assert metrics.spaced_queries(50, 4).tolist() == [0, 1, 2, 3]  # never more than there are
    assert metrics.spaced_queries(1, 9).tolist() == [0]
    with pytest.raises(ValueError, match="n_queries"):
        metrics.spaced_queries(0, 9)


@pytest.mark.parametrize("direction", ["t2i", "i2t"])
def test_queries_by_positive_orders_them_by_their_best_positive(direction):
    S = torch.randn(4, 8, generator=torch.Generator().manual_seed(1)).tanh()
    c2i = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    order, Sq, pos = metrics.queries_by_positive(S, c2i, 3, direction)
    queries = range(8) if direction == "t2i" else range(4)
    best = {q: max(float(S[c2i[c], c]) for c in range(8) if (c == q if direction == "t2i" else c2i[c] == q))
            for q in queries}
    shown = metrics.spaced_queries(3, len(best)).tolist()
    assert order.tolist() == sorted(shown, key=lambda q: best[q])
    for row, q in enumerate(order):
        full = (S.T if direction == "t2i" else S).numpy()[q]
        assert np.array_equal(Sq[row], full)
        assert pos[row].sum() == (1 if direction == "t2i" else 2) and Sq[row][pos[row]].max() == best[q]


def test_count_percentiles_are_numpys_and_checked():
    counts = np.arange(20.0).reshape(5, 4)
    low, high = metrics.count_percentiles(counts, (0.0, 100.0))
    assert low.tolist() == counts[0].tolist() and high.tolist() == counts[-1].tolist()
    assert np.allclose(metrics.count_percentiles(counts)[0], [np.percentile(counts[:, j], 5) for j in range(4)])
    for bad in ((95.0, 5.0), (5.0,), (-1.0, 50.0), (5.0, 101.0)):
        with pytest.raises(ValueError, match="percentiles"):
            metrics.count_percentiles(counts, bad)
