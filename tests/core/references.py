"""Slow, obviously-correct loss references written from the papers.

Plain Python loops over queries and candidates, torch scalars in float64 so that
autograd gives the reference gradients too. They share no code with vlr_lib.losses.
`pos` is a nested list of bools (pos[i][j]: caption j describes image i).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from vlr_lib import losses as L  # only in CASES, to pair each library call with its reference


def diagonal(n: int) -> list[list[bool]]:
    return [[i == j for j in range(n)] for i in range(n)]


def as_lists(mask: Tensor | None, n_rows: int, n_cols: int) -> list[list[bool]]:
    return diagonal(n_rows) if mask is None else [[bool(mask[i, j]) for j in range(n_cols)] for i in range(n_rows)]


def _pairs(pos):
    return [(i, j) for i in range(len(pos)) for j in range(len(pos[0])) if pos[i][j]]


def _row_negs(S, pos, i):
    return [S[i, n] for n in range(S.shape[1]) if not pos[i][n]]


def _col_negs(S, pos, j):
    return [S[n, j] for n in range(S.shape[0]) if not pos[n][j]]


def _relu(x):
    return x if x > 0 else x * 0.0


def _margin_of(margin, p):
    return margin[p] if isinstance(margin, Tensor) else margin


def triplet_all(S, margin, pos):
    """Bleeker eq. 3: every negative of each query, both directions, summed."""
    total = S.new_zeros(())
    for p, (i, j) in enumerate(_pairs(pos)):
        m = _margin_of(margin, p)
        for s_neg in _row_negs(S, pos, i) + _col_negs(S, pos, j):
            total = total + _relu(m - S[i, j] + s_neg)
    return total


def triplet_hardest(S, margin, pos):
    """Li eq. 1 / Bleeker eq. 1: the hardest negative of each query, both directions."""
    total = S.new_zeros(())
    for p, (i, j) in enumerate(_pairs(pos)):
        m = _margin_of(margin, p)
        for negs in (_row_negs(S, pos, i), _col_negs(S, pos, j)):
            hardest = negs[0]
            for s in negs[1:]:
                if s > hardest:
                    hardest = s
            total = total + _relu(m + hardest - S[i, j])
    return total


def triplet_soft(S, pos):
    """Hermans, Beyer & Leibe's soft margin on Triplet-SH: log(1 + exp(hardest negative - positive)), both ways."""
    total = S.new_zeros(())
    for i, j in _pairs(pos):
        for negs in (_row_negs(S, pos, i), _col_negs(S, pos, j)):
            hardest = negs[0]
            for s in negs[1:]:
                if s > hardest:
                    hardest = s
            total = total + torch.log(1.0 + torch.exp(hardest - S[i, j]))
    return total


def _softmax_ce(s_pos, negs, scale):
    denom = torch.exp(scale * s_pos)
    for s in negs:
        denom = denom + torch.exp(scale * s)
    return -(scale * s_pos - torch.log(denom))


def info_nce(S, temperature, pos):
    """Bleeker eq. 4 / Li eq. 3, both directions, summed over positive pairs."""
    total = S.new_zeros(())
    for i, j in _pairs(pos):
        total = total + _softmax_ce(S[i, j], _row_negs(S, pos, i), 1 / temperature)
        total = total + _softmax_ce(S[i, j], _col_negs(S, pos, j), 1 / temperature)
    return total


def unified(S, margin, gamma, pos, weights=None):
    """Li eq. 5 (eq. 24 with weights, eq. 26 with a margin per pair), as printed."""
    W = torch.ones_like(S) if weights is None else weights
    total = S.new_zeros(())
    for p, (i, j) in enumerate(_pairs(pos)):
        m = _margin_of(margin, p)
        for direction in ("row", "col"):
            acc = S.new_ones(())
            others = range(S.shape[1]) if direction == "row" else range(S.shape[0])
            for n in others:
                a, b = (i, n) if direction == "row" else (n, j)
                if not pos[a][b]:
                    acc = acc + torch.exp(gamma * (W[a, b] * S[a, b] - W[i, j] * S[i, j] + m))
            total = total + torch.log(acc) / gamma
    return total


def _count(topk, available):
    """An int is a count; a float a fraction of `available`, rounded up (0.3 of 10 is 3: decimal, not binary)."""
    if isinstance(topk, float):
        from decimal import ROUND_CEILING, Decimal

        return max(1, int((Decimal(repr(topk)) * available).to_integral_value(ROUND_CEILING)))
    return topk


def sampled_softmax(S, scale, topk, pos):
    """Veit & Wilber eq. 2 (topk=None) and eq. 3 (top-k negatives per row), mean over pairs."""
    pairs = _pairs(pos)
    total = S.new_zeros(())
    for i, j in pairs:
        negs = sorted(_row_negs(S, pos, i), key=lambda s: float(s.detach()), reverse=True)
        if topk is not None:
            negs = negs[:_count(topk, len(negs))]
        total = total + _softmax_ce(S[i, j], negs, scale)
    return total / len(pairs)


def cross_example_softmax(S, scale, topk, pos):
    """Veit & Wilber eq. 5 (all negatives of the batch) and eq. 6 (top-k of them)."""
    everything = [S[a, b] for a in range(S.shape[0]) for b in range(S.shape[1]) if not pos[a][b]]
    everything = sorted(everything, key=lambda s: float(s.detach()), reverse=True)
    if topk is not None:
        everything = everything[:_count(topk, len(everything))]
    pairs = _pairs(pos)
    total = S.new_zeros(())
    for i, j in pairs:
        total = total + _softmax_ce(S[i, j], everything, scale)
    return total / len(pairs)


def smooth_ap(S, tau, pos):
    """Bleeker eqs. 5-8: mean over row queries of 1 - smoothed AP, G(x) = sigmoid(x / tau)."""
    total = S.new_zeros(())
    for q in range(S.shape[0]):
        positives = [c for c in range(S.shape[1]) if pos[q][c]]
        ap = S.new_zeros(())
        for i in positives:
            above_pos = S.new_ones(())
            above_all = S.new_ones(())
            for c in range(S.shape[1]):
                if c == i:
                    continue
                g = 1.0 / (1.0 + torch.exp(-(S[q, c] - S[q, i]) / tau))
                above_all = above_all + g
                if pos[q][c]:
                    above_pos = above_pos + g
            ap = ap + above_pos / above_all
        total = total + (1.0 - ap / len(positives))
    return total / S.shape[0]


def clip_learned(S, logit_scale, pos):
    """Radford et al. (CLIP) Fig. 3: logits = S * exp(t), cross-entropy over each row and each column.

    Summed over positive pairs and both directions (the library's "sum"; CLIP's (loss_i + loss_t) / 2
    is this divided by 2N). `logit_scale` is a 0-D tensor, so autograd gives d/dt too."""
    scale = torch.exp(logit_scale)
    total = S.new_zeros(())
    for i, j in _pairs(pos):
        for negs in (_row_negs(S, pos, i), _col_negs(S, pos, j)):
            denom = torch.exp(scale * S[i, j])
            for s in negs:
                denom = denom + torch.exp(scale * s)
            total = total - torch.log(torch.exp(scale * S[i, j]) / denom)
    return total


def siglip(S, logit_scale, logit_bias, pos):
    """Zhai et al. Algorithm 1: t = exp(t'), z_ij = +1 on positives and -1 elsewhere,
    -(1 / n) sum_ij log sigmoid(z_ij (t s_ij + b)), n the number of images; a pair at a time."""
    t = torch.exp(logit_scale)
    total = S.new_zeros(())
    for i in range(S.shape[0]):
        for j in range(S.shape[1]):
            z = 1.0 if pos[i][j] else -1.0
            total = total - torch.log(1.0 / (1.0 + torch.exp(-z * (t * S[i, j] + logit_bias))))
    return total / S.shape[0]


# The reference checks of every registered loss (tests/core/test_losses.py runs them; tests/core/test_registry.py fails
# for a registered loss without one). Each case "<loss>" or "<loss>_<variant>": (the library's call, this file's).
CASES = {
    "triplet_all": (lambda S, pm: L.triplet_all(S, 0.2, "sum", pos_mask=pm), lambda S, p: triplet_all(S, 0.2, p)),
    "triplet_hardest": (
        lambda S, pm: L.triplet_hardest(S, 0.3, "sum", pos_mask=pm),
        lambda S, p: triplet_hardest(S, 0.3, p),
    ),
    "triplet_soft": (lambda S, pm: L.triplet_soft(S, "sum", pos_mask=pm), lambda S, p: triplet_soft(S, p)),
    "info_nce": (lambda S, pm: L.info_nce(S, 0.1, "sum", pos_mask=pm), lambda S, p: info_nce(S, 0.1, p)),
    "unified": (
        lambda S, pm: L.unified(S, 0.2, 60.0, "sum", pos_mask=pm),
        lambda S, p: unified(S, 0.2, 60.0, p),
    ),
    "sampled_softmax": (
        lambda S, pm: L.sampled_softmax(S, 20.0, None, "mean", pos_mask=pm),
        lambda S, p: sampled_softmax(S, 20.0, None, p),
    ),
    "sampled_softmax_topk": (
        lambda S, pm: L.sampled_softmax(S, 20.0, 2, "mean", pos_mask=pm),
        lambda S, p: sampled_softmax(S, 20.0, 2, p),
    ),
    # a fraction of each row's negatives: 3 of 5, and 2 of 4 in the rows of a repeated image
    "sampled_softmax_topk_fraction": (
        lambda S, pm: L.sampled_softmax(S, 20.0, 0.5, "mean", pos_mask=pm),
        lambda S, p: sampled_softmax(S, 20.0, 0.5, p),
    ),
    "cross_example_softmax": (
        lambda S, pm: L.cross_example_softmax(S, 20.0, None, "mean", pos_mask=pm),
        lambda S, p: cross_example_softmax(S, 20.0, None, p),
    ),
    "cross_example_topk_count": (
        lambda S, pm: L.cross_example_softmax(S, 20.0, 7, "mean", pos_mask=pm),
        lambda S, p: cross_example_softmax(S, 20.0, 7, p),
    ),
    "cross_example_topk_fraction": (
        lambda S, pm: L.cross_example_softmax(S, 20.0, 0.5, "mean", pos_mask=pm),
        lambda S, p: cross_example_softmax(S, 20.0, 0.5, p),
    ),
    "smooth_ap": (lambda S, pm: L.smooth_ap(S, 0.01, pos_mask=pm), lambda S, p: smooth_ap(S, 0.01, p)),
    "smooth_ap_soft": (lambda S, pm: L.smooth_ap(S, 0.3, pos_mask=pm), lambda S, p: smooth_ap(S, 0.3, p)),
    # the learned scalars as numbers here; as tensors with their own gradients in test_losses' test_learned_scalars_*
    "clip_learned": (
        lambda S, pm: L.clip_learned(S, L.CLIP_LOGIT_SCALE_INIT, "sum", pos_mask=pm),
        lambda S, p: clip_learned(S, _scalar(L.CLIP_LOGIT_SCALE_INIT), p),
    ),
    "siglip": (
        lambda S, pm: L.siglip(S, L.SIGLIP_LOGIT_SCALE_INIT, L.SIGLIP_LOGIT_BIAS_INIT, "mean", pos_mask=pm),
        lambda S, p: siglip(S, _scalar(L.SIGLIP_LOGIT_SCALE_INIT), _scalar(L.SIGLIP_LOGIT_BIAS_INIT), p),
    ),
    "siglip_balanced": (  # t = 5, b = 0: positives and negatives both in the sigmoid's bend
        lambda S, pm: L.siglip(S, math.log(5.0), 0.0, "mean", pos_mask=pm),
        lambda S, p: siglip(S, _scalar(math.log(5.0)), _scalar(0.0), p),
    ),
}


def _scalar(x: float) -> Tensor:
    return torch.tensor(x, dtype=torch.float64)
