"""Retrieval evaluation on a similarity matrix: R@K both ways, rsum, mAP@K, PR-AUC.

S_eval is [n_images, n_captions] (rows images, columns captions: the S contract of
docs/architecture.md); ``caption_to_image[c]`` is the image that caption c
describes, so an image may have several captions (5 in Flickr30K / COCO) while
each caption has exactly one image.

Ties (one convention for every ranking: R@K, ranks, mAP@k, AP). A negative that
scores *the same* as the positive is ranked above it:

    rank = 1 + #{negatives scoring >= the positive}

(the pessimistic reading of Bleeker & de Rijke eq. 6, whose "ranked above" does
not say what a tie is). Why this one: a retrieval system must put the right item
in front of the wrong ones, and a tie does not; the convention never flatters a
model, so a collapsed model (zeroed heads, every score equal) gets R@K = 0 and
mAP@k = 0, not the perfect 100 and 1 that "ties favour the positive" would give it
-- and the grid and showdown pick epochs by validation rsum, so a flattering
convention would select exactly such a collapsed epoch. Without ties it gives the
same numbers as any other convention (real-valued scores tie only in constructed
cases or with duplicated images or captions). The expected rank under random
tie-breaking would be the other defensible choice; it still awards a constant S
the chance level instead of 0, which hides the collapse less clearly. For an image
query with several captions the rank is that of its best caption, and captions of
the same image never count against each other. mAP@k places every tied negative
before the positive as well; the order among tied positives does not change AP.

PR-AUC is tie-safe by construction: a precision-recall curve is drawn by
thresholds on the score, so tied pairs are accepted together (as in
``sklearn.metrics.average_precision_score``). A constant S has a single threshold
accepting every pair, so its PR-AUC is the base rate n_captions / (n_images *
n_captions) = 1 / n_images, the random scorer's precision.

Memory. A 5,000 x 25,000 evaluation has 125M pairs; a global argsort would
need 1 GB of int64 indices on top of the 0.5 GB matrix. Instead, everything
(validation included) runs on one block of ``chunk_size`` rows at a time:
ranks are *counts* of candidates scoring at or above the positive, mAP@k
needs only a short top-k per row, and PR-AUC counts the pairs above each
positive score in one block's sorted scores. The working set is a few
``chunk_size x n_captions`` temporaries. Peak RSS above the matrix, measured
at 5,000 x 25,000 float32: ~15 MB with chunk_size=64, 50-80 MB with the
default 256, against ~870 MB for the same code in one block. Time is
O(n_images * n_captions) per pass; PR-AUC adds the block sorts and is the
slowest (7-11 s single-threaded on this project's CPU at that size, against
~1 s each for the recalls and mAP@k).
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from . import losses
from ._checks import check_choice, check_finite, check_int, check_tensor
from .similarity import DIRECTIONS, positive_mask

DEFAULT_CHUNK = 256  # rows per block: 256 x 25,000 float32 is 25.6 MB per temporary


# ----------------------------------------------------------------- validation
def _row_blocks(S: Tensor, chunk_size: int):
    """Yield (row offset, block of at most chunk_size rows of S): the one place that chunks."""
    for a in range(0, S.shape[0], chunk_size):
        yield a, S[a : a + chunk_size]


def _as_scores(S_eval: object, chunk_size: int) -> Tensor:
    if isinstance(S_eval, np.ndarray):
        S_eval = torch.from_numpy(S_eval)
    if not isinstance(S_eval, Tensor) or S_eval.dim() != 2:
        check_tensor("S_eval", S_eval, ndim=2)  # raises the library's TypeError / ValueError
    S = S_eval.detach()
    if S.shape[0] < 1 or S.shape[1] < 1:
        raise ValueError(f"S_eval must have at least one image and one caption, got shape {tuple(S.shape)}")
    for _, block in _row_blocks(S, chunk_size):
        check_tensor("S_eval", block)  # dtype and finiteness per block: no full-size bool mask
    return S


def _as_caption_to_image(caption_to_image: object, S: Tensor) -> Tensor:
    name = "caption_to_image"
    if isinstance(caption_to_image, (list, tuple)):
        if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in caption_to_image):
            raise TypeError(f"{name} must hold integers (image indices)")
        caption_to_image = torch.tensor(caption_to_image, dtype=torch.long)
    elif isinstance(caption_to_image, np.ndarray):
        caption_to_image = torch.from_numpy(caption_to_image)
    if not isinstance(caption_to_image, Tensor):
        raise TypeError(f"{name} must be a tensor, array or list of ints, got {type(caption_to_image).__name__}")
    c2i = caption_to_image
    if c2i.dtype == torch.bool or c2i.is_floating_point() or c2i.is_complex():
        raise TypeError(f"{name} must have an integer dtype, got {c2i.dtype}")
    n_images, n_captions = S.shape
    if c2i.dim() != 1 or c2i.numel() != n_captions:
        raise ValueError(f"{name} must be 1-D with one entry per caption ({n_captions}), got shape {tuple(c2i.shape)}")
    c2i = c2i.to(device=S.device, dtype=torch.long)
    if bool(((c2i < 0) | (c2i >= n_images)).any()):
        raise ValueError(f"{name} values must lie in [0, {n_images}) (image indices)")
    n_caps = torch.bincount(c2i, minlength=n_images)
    if bool((n_caps == 0).any()):
        bad = int((n_caps == 0).nonzero()[0])
        raise ValueError(f"{name} gives image {bad} no caption; every image needs at least one")
    return c2i


def _check_ks(ks: object, n_images: int, n_captions: int) -> tuple[int, ...]:
    if isinstance(ks, numbers.Integral) or not isinstance(ks, Sequence) or len(ks) == 0:
        raise TypeError(f"ks must be a non-empty tuple of ints, got {ks!r}")
    # An R@K needs K candidates in both directions: captions (i2t) and images (t2i).
    out = tuple(check_int("ks", k, 1, min(n_images, n_captions)) for k in ks)
    if len(set(out)) != len(out):
        raise ValueError(f"ks must not repeat a value, got {ks!r}")
    return out


def _validate(S_eval: object, caption_to_image: object, chunk_size: object) -> tuple[Tensor, Tensor, int]:
    chunk_size = check_int("chunk_size", chunk_size)
    S = _as_scores(S_eval, chunk_size)
    return S, _as_caption_to_image(caption_to_image, S), chunk_size


def positive_pairs(S_eval: Tensor, caption_to_image: Tensor) -> Tensor:
    """Bool [n_images, n_captions]: True where caption c describes image i (after every metric's input checks).

    Derived in notebooks/01_embedding_and_evaluation.py.
    """
    S, c2i, _ = _validate(S_eval, caption_to_image, DEFAULT_CHUNK)
    return positive_mask(torch.arange(S.shape[0], device=S.device), c2i)


# ---------------------------------------------------------------------- ranks
def _positive_scores(S: Tensor, c2i: Tensor) -> Tensor:
    """S[caption_to_image[c], c] for every caption c: the score of each matching pair."""
    return S[c2i, torch.arange(c2i.numel(), device=S.device)]


def _ranks(S: Tensor, c2i: Tensor, chunk_size: int, i2t: bool, t2i: bool) -> tuple[Tensor | None, Tensor | None]:
    """One pass over row blocks; a rank is 1 + the number of negatives scoring >= the positive."""
    n_images, n_captions = S.shape
    pos_score = _positive_scores(S, c2i)
    # Best caption score of each image, and how many of its captions reach it (they are not negatives).
    best = S.new_full((n_images,), float("-inf")).scatter_reduce_(0, c2i, pos_score, "amax")
    n_best = torch.zeros(n_images, dtype=torch.int32, device=S.device).index_add_(
        0, c2i, (pos_score == best[c2i]).to(torch.int32))
    r_i2t = torch.empty(n_images, dtype=torch.long, device=S.device) if i2t else None
    at_or_above = torch.zeros(n_captions, dtype=torch.long, device=S.device) if t2i else None
    for a, block in _row_blocks(S, chunk_size):
        rows = slice(a, a + block.shape[0])
        # int32 partial counts: exact (< 2**31) and several times faster than int64 sums on CPU.
        # Every other caption of the image scores <= best, so >= counts the negatives plus n_best.
        if i2t:
            r_i2t[rows] = 1 + (block >= best[rows, None]).sum(1, dtype=torch.int32) - n_best[rows]
        if t2i:  # images of this block scoring >= each caption's own image (which counts itself once)
            at_or_above += (block >= pos_score[None, :]).sum(0, dtype=torch.int32)
    return r_i2t, at_or_above


@torch.no_grad()
def ranks_i2t(S_eval: Tensor, caption_to_image: Tensor, chunk_size: int = DEFAULT_CHUNK) -> Tensor:
    """1-based rank of each image query's best-ranked caption (VSE++ protocol), shape [n_images].

    rank_i = 1 + #{captions c of other images : S[i, c] >= max over i's captions of S[i, c']}
    (Bleeker & de Rijke eq. 6 applied to the best positive; a tied negative ranks first).

    Derived in notebooks/01_embedding_and_evaluation.py.
    """
    S, c2i, chunk_size = _validate(S_eval, caption_to_image, chunk_size)
    return _ranks(S, c2i, chunk_size, i2t=True, t2i=False)[0]


@torch.no_grad()
def ranks_t2i(S_eval: Tensor, caption_to_image: Tensor, chunk_size: int = DEFAULT_CHUNK) -> Tensor:
    """1-based rank of each caption query's image, shape [n_captions].

    rank_c = 1 + #{images i != caption_to_image[c] : S[i, c] >= S[caption_to_image[c], c]}
    (a tied image ranks before the true one).

    Derived in notebooks/01_embedding_and_evaluation.py.
    """
    S, c2i, chunk_size = _validate(S_eval, caption_to_image, chunk_size)
    return _ranks(S, c2i, chunk_size, i2t=False, t2i=True)[1]


def _recall(ranks: Tensor, k: int) -> float:
    return 100.0 * float((ranks <= k).double().mean())


@torch.no_grad()
def retrieval_metrics(
    S_eval: Tensor,
    caption_to_image: Tensor,
    ks: tuple[int, ...] = (1, 5, 10),
    chunk_size: int = DEFAULT_CHUNK,
) -> dict[str, float]:
    """Recall@K in both directions and their sum rsum, all in percent.

    R@K = 100 * fraction of queries whose rank (see ``ranks_i2t`` / ``ranks_t2i``)
    is <= K. i2t: an image counts as retrieved when any of its captions is in
    the top K (VSE++ protocol, Faghri et al.; Bleeker & de Rijke sec. 3). rsum
    is the sum of all 2 * len(ks) recalls (Bleeker & de Rijke Table 1; Li et
    al. Fig. 3). Keys: ``i2t_r{k}``, ``t2i_r{k}`` for k in ks, and ``rsum``.
    Every K must be <= min(n_images, n_captions).

    Derived in notebooks/01_embedding_and_evaluation.py.
    """
    S, c2i, chunk_size = _validate(S_eval, caption_to_image, chunk_size)
    ks = _check_ks(ks, *S.shape)
    r_i2t, r_t2i = _ranks(S, c2i, chunk_size, i2t=True, t2i=True)
    out = {f"i2t_r{k}": _recall(r_i2t, k) for k in ks}
    out.update({f"t2i_r{k}": _recall(r_t2i, k) for k in ks})
    out["rsum"] = float(sum(out.values()))
    return out


# ---------------------------------------------------------------------- mAP@k
def _positives_by_image(S: Tensor, c2i: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Positive pairs grouped by image, best first: (image, score, #positives before, group bounds)."""
    score = _positive_scores(S, c2i)
    order = torch.sort(score, descending=True, stable=True).indices
    order = order[torch.sort(c2i[order], stable=True).indices]  # by image, best score first inside
    img, score = c2i[order], score[order]
    counts = torch.bincount(img, minlength=S.shape[0])
    starts = torch.cumsum(counts, 0) - counts
    before = torch.arange(img.numel(), device=S.device) - starts[img]
    return img, score, before, torch.cat([starts, starts.new_tensor([img.numel()])])


@torch.no_grad()
def map_at_k(S_eval: Tensor, caption_to_image: Tensor, k: int = 5, chunk_size: int = DEFAULT_CHUNK) -> float:
    """Mean average precision at k of the image -> text direction, a fraction in [0, 1].

    Bleeker & de Rijke report mAP@5 for i2t (5 relevant captions per image,
    Table 1, as a fraction) from AP of eq. (5). Truncated at k:
        AP@k(i) = 1 / min(k, n_rel(i)) * sum_{r <= k} P@r * rel(r),
    the normaliser min(k, n_rel) makes a perfect top-k score 1 even when an
    image has fewer than k or more than k captions (with 5 captions and k=5 it
    is the plain 1/5).

    Ordering: by score, a negative tied with a caption placed before it (the
    module's tie convention); the order among tied relevant captions does not
    change AP. Caption p, the (b+1)-th best of its image, then sits at position
    r = 1 + #{negatives scoring >= p} + b and contributes (b+1)/r. This is
    eqs. (5)-(6) whenever scores are distinct; for captions tied with each other
    eq. (6) read literally would give each the same rank, which is not the AP of
    any ranked list, so we do not follow it.

    Only the k best *negatives* of a row are needed (no full-row sort): a caption
    at position <= k has fewer than k negatives at or above it, all of them among
    the k best; for one past k, those k best already push it out.

    Derived in notebooks/01_embedding_and_evaluation.py.
    """
    S, c2i, chunk_size = _validate(S_eval, caption_to_image, chunk_size)
    k = check_int("k", k)
    n_images, n_captions = S.shape
    img, score, before, bounds = _positives_by_image(S, c2i)
    ap = torch.zeros(n_images, dtype=torch.float64, device=S.device)
    for a, block in _row_blocks(S, chunk_size):
        rows = torch.arange(a, a + block.shape[0], device=S.device)
        negatives = block.masked_fill(c2i[None, :] == rows[:, None], float("-inf"))
        top_neg = negatives.topk(min(k, n_captions), dim=1).values
        lo, hi = int(bounds[a]), int(bounds[a + block.shape[0]])  # positives of these images
        neg_at_or_above = (top_neg[img[lo:hi] - a] >= score[lo:hi, None]).sum(dim=1)
        position = 1 + neg_at_or_above + before[lo:hi]
        gain = torch.where(position <= k, (before[lo:hi] + 1).double() / position.double(), 0.0)
        ap.index_add_(0, img[lo:hi], gain)
    n_rel = torch.bincount(c2i, minlength=n_images).clamp(max=k)
    return float((ap / n_rel).mean())


def _one_query(scores: object, is_pos: object) -> tuple[Tensor, Tensor]:
    """One query's candidate scores (1-D float tensor) and its bool positive mask."""
    s = scores.detach() if isinstance(scores, Tensor) else torch.as_tensor(np.ascontiguousarray(scores))
    p = is_pos.detach() if isinstance(is_pos, Tensor) else torch.as_tensor(np.ascontiguousarray(is_pos))
    check_tensor("scores", s, ndim=1)
    if p.dtype != torch.bool or p.shape != s.shape:
        raise ValueError(f"is_pos must be a bool mask of the shape of scores {tuple(s.shape)}, got {p.dtype} "
                         f"{tuple(p.shape)}")
    if not bool(p.any()):
        raise ValueError("is_pos must mark at least one positive")
    return s, p.to(s.device)


def average_precision(scores: Tensor, is_pos: Tensor) -> float:
    """Average precision of one query's whole ranking (Bleeker & de Rijke eqs. 5-6), in [0, 1].

    AP = mean over positives of R(i, P) / R(i, Omega), the precision at each
    positive's position. With the module's tie convention the (b+1)-th best
    positive p sits at 1 + #{negatives scoring >= p} + b, exactly as in
    :func:`map_at_k` (which is the mean of this over images when k reaches every
    caption). `scores` [M] and `is_pos` (bool [M]): tensors or arrays.

    Derived in notebooks/06_smooth_ap.py.
    """
    s, p = _one_query(scores, is_pos)
    pos = torch.sort(s[p], descending=True).values
    before = torch.arange(pos.numel(), device=s.device)
    neg_at_or_above = (s[~p][None, :] >= pos[:, None]).sum(dim=1)
    return float(((before + 1).double() / (1 + neg_at_or_above + before).double()).mean())


def smooth_average_precision(scores: Tensor, is_pos: Tensor, tau: float = 0.01) -> float:
    """SmoothAP of one query's whole ranking (Bleeker & de Rijke eqs. 7-8), in [0, 1].

    :func:`average_precision` with every "ranked above" indicator replaced by the sigmoid
    G(x; tau) of ``losses.smooth_step``: read off the library loss as 1 - ``losses.smooth_ap``
    on the single row, in float64. Without ties it tends to the exact AP as tau -> 0.
    `scores` [M] and `is_pos` (bool [M]): tensors or arrays.

    Derived in notebooks/06_smooth_ap.py.
    """
    s, p = _one_query(scores, is_pos)
    return 1.0 - float(losses.smooth_ap(s.double()[None], tau, pos_mask=p[None]))


# -------------------------------------------------------------------- PR-AUC
def _sorted_values(block: Tensor) -> Tensor:
    """The block's scores in ascending order, values only (no int64 indices kept)."""
    flat = block.reshape(-1)
    if flat.device.type == "cpu" and flat.dtype in (torch.float32, torch.float64):
        return torch.from_numpy(np.sort(flat.numpy()))  # numpy's SIMD sort: ~2x faster here
    return torch.sort(flat).values


def _pr_points(S: Tensor, c2i: Tensor, chunk_size: int) -> tuple[Tensor, Tensor]:
    """Precision and recall at every distinct positive score, highest threshold first.

    Exact without a global sort: the thresholds are the distinct positive
    scores t_1 < ... < t_T (at most n_captions of them). Each block of rows is
    sorted on its own, values only, and #pairs >= t_j of the block is read off
    with a binary search of the T thresholds; the counts add up over blocks.
    Cost O(N M log(chunk M)) time and O(chunk_size * M) memory, against a
    global sort's 125M values + 125M int64 indices (1.5 GB) at 5,000 x 25,000.
    """
    n_captions = c2i.numel()
    thresholds, n_pos_at = torch.unique(_positive_scores(S, c2i), sorted=True, return_counts=True)
    n_at_or_above = torch.zeros_like(n_pos_at)
    for _, block in _row_blocks(S, chunk_size):
        values = _sorted_values(block)
        n_at_or_above += values.numel() - torch.searchsorted(values, thresholds)
    tp = torch.flip(torch.cumsum(torch.flip(n_pos_at, [0]), 0), [0])  # positives >= each threshold
    precision = (tp.double() / n_at_or_above.double()).flip(0)
    recall = (tp.double() / n_captions).flip(0)
    return precision, recall


@torch.no_grad()
def pr_curve(S_eval: Tensor, caption_to_image: Tensor, chunk_size: int = DEFAULT_CHUNK) -> tuple[Tensor, Tensor]:
    """Global precision-recall curve over all image-caption pairs (Veit & Wilber, Fig. 4 left).

    Every pair (i, c) is a retrieved item with score S[i, c], relevant iff
    caption_to_image[c] == i. Returns float64 (precision, recall), one point per
    distinct score of a matching pair, recall increasing: the point reached by
    accepting every pair scoring >= that threshold (tied pairs enter together).
    The curve starts at the first such point, not at an artificial (0, 1).

    Derived in notebooks/05_cross_example_softmax.py.
    """
    S, c2i, chunk_size = _validate(S_eval, caption_to_image, chunk_size)
    return _pr_points(S, c2i, chunk_size)


@torch.no_grad()
def pr_auc(S_eval: Tensor, caption_to_image: Tensor, chunk_size: int = DEFAULT_CHUNK) -> float:
    """Area under the global precision-recall curve, a fraction in [0, 1] (Veit & Wilber, Table 1).

    Step (average-precision) integration over the points of ``pr_curve``:
        PR-AUC = sum_n (R_n - R_{n-1}) * P_n,  R_0 = 0,
    i.e. no linear interpolation (which over-estimates PR area). This equals
    ``sklearn.metrics.average_precision_score`` on the flattened matrix,
    computed exactly, in blocks of rows, with no global sort (see ``_pr_points``).

    Derived in notebooks/01_embedding_and_evaluation.py.
    """
    precision, recall = pr_curve(S_eval, caption_to_image, chunk_size)
    steps = torch.diff(recall, prepend=recall.new_zeros(1))
    return float((steps * precision).sum())


@torch.no_grad()
def precision_recall_at(
    S_eval: Tensor, caption_to_image: Tensor, threshold: float, chunk_size: int = DEFAULT_CHUNK
) -> tuple[float, float]:
    """Precision and recall over all pairs when every pair scoring >= `threshold` is called a match.

    Precision = matching pairs among the accepted / accepted pairs (1.0 when none is
    accepted, the convention at the start of a PR curve); recall = accepted
    matches / all matches. Tied pairs are accepted together, so at the score of a
    matching pair this is a point of :func:`pr_curve` (Veit & Wilber Fig. 4: one
    global threshold for every query).

    Derived in notebooks/05_cross_example_softmax.py.
    """
    S, c2i, chunk_size = _validate(S_eval, caption_to_image, chunk_size)
    t = check_finite("threshold", threshold)
    accepted = hits = 0
    for a, block in _row_blocks(S, chunk_size):
        rows = torch.arange(a, a + block.shape[0], device=S.device)
        ok = block >= t
        accepted += int(ok.sum())
        hits += int((ok & (c2i[None, :] == rows[:, None])).sum())
    return (hits / accepted if accepted else 1.0), hits / c2i.numel()


@torch.no_grad()
def neighbor_counts(
    S_eval: Tensor, thresholds: object, direction: str = "t2i", chunk_size: int = DEFAULT_CHUNK
) -> Tensor:
    """[n_queries, len(thresholds)]: how many candidates of each query score >= each threshold.

    Veit & Wilber Fig. 4 (right): if the counts of all queries agree at every
    threshold, the scores of different queries live on one scale (calibration).
    Queries are the captions (columns of S) for "t2i", the images (rows) for "i2t".

    Derived in notebooks/05_cross_example_softmax.py.
    """
    S = _as_scores(S_eval, check_int("chunk_size", chunk_size))
    check_choice("direction", direction, DIRECTIONS)
    t = torch.as_tensor(np.asarray(thresholds, dtype=np.float64), device=S.device)  # compared in float64
    check_tensor("thresholds", t, ndim=1)
    Sq = S if direction == "i2t" else S.T
    out = torch.empty(Sq.shape[0], t.numel(), dtype=torch.long, device=S.device)
    for a, block in _row_blocks(Sq, chunk_size):
        srt = torch.sort(block.double(), dim=1).values.contiguous()
        # values >= x = n - (number of values < x) = n - leftmost insertion index of x
        out[a : a + block.shape[0]] = srt.shape[1] - torch.searchsorted(srt, t.expand(srt.shape[0], -1).contiguous())
    return out


def spaced_queries(n_queries: int, total: int) -> np.ndarray:
    """At most `n_queries` of `total` query indices, evenly spaced from the first to the last: the queries a figure of
    per-query scores shows (Veit & Wilber Fig. 4).

    Derived in notebooks/05_cross_example_softmax.py.
    """
    n_queries = check_int("n_queries", n_queries)
    return np.unique(np.linspace(0, total - 1, min(n_queries, total)).round().astype(int))


def queries_by_positive(
    S_eval: Tensor, caption_to_image: Tensor, n_queries: int, direction: str = "t2i"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`spaced_queries` of `direction` ordered by their positive's score (an image query, with several
    positives, by its best): (query indices, their rows of S, their positive masks), as numpy arrays.

    Derived in notebooks/05_cross_example_softmax.py.
    """
    check_choice("direction", direction, DIRECTIONS)
    S, pos = S_eval.detach().cpu().numpy(), positive_pairs(S_eval, caption_to_image).cpu().numpy()
    Sq, pos = (S, pos) if direction == "i2t" else (S.T, pos.T)
    queries = spaced_queries(n_queries, Sq.shape[0])
    order = queries[np.argsort(np.where(pos, Sq, -np.inf).max(axis=1)[queries], kind="stable")]
    return order, Sq[order], pos[order]


def count_percentiles(counts: object, percentiles: Sequence[float] = (5.0, 95.0),
                      how_many: int | None = None) -> list[np.ndarray]:
    """Per threshold, each of the increasing `percentiles` (in [0, 100]) of :func:`neighbor_counts` over the
    queries: between (5, 95), 90% of the queries' counts. `how_many`: the number of percentiles the caller draws
    (None: two or more).

    Derived in notebooks/05_cross_example_softmax.py.
    """
    if how_many is not None and len(percentiles) != how_many:
        raise ValueError(f"percentiles must be {how_many} values, got {percentiles}")
    if not (len(percentiles) >= 2 and 0.0 <= percentiles[0] and percentiles[-1] <= 100.0
            and bool((np.diff(percentiles) > 0).all())):
        raise ValueError(f"percentiles must be increasing values in [0, 100], got {percentiles}")
    return [np.percentile(np.asarray(counts, dtype=float), p, axis=0) for p in percentiles]


def chance_rsum(caption_to_image: Tensor | Sequence[int], ks: tuple[int, ...] = (1, 5, 10)) -> float:
    """Expected rsum of a random ranking (in percent), the floor every trained model must clear.

    With M captions, N images and n_i captions of image i, a uniformly random order gives
    i2t R@K = mean_i [1 - C(M - n_i, K) / C(M, K)] (none of i's captions in the top K)
    and t2i R@K = K / N (the one true image among N). Five captions per image and
    N = 200: 0.5 + 2.5 + 4.9 (i2t) + 0.5 + 2.5 + 5.0 (t2i) = 15.9. Recalls at K larger than the
    split (fewer than K images) are left out, as ``train.evaluate.split_metrics`` leaves them out.
    Derived and checked against exhaustive random rankings in notebook 01.

    Derived in notebooks/01_embedding_and_evaluation.py.
    """
    c2i = torch.as_tensor(caption_to_image)
    counts = torch.bincount(c2i).tolist()
    n_images, n_caps = len(counts), int(c2i.numel())
    total = 0.0
    for k in (k for k in ks if k <= min(n_images, n_caps)):  # the recalls evaluate.split_metrics reports
        miss = np.mean([math.comb(n_caps - n, k) / math.comb(n_caps, k) for n in counts])
        total += 100.0 * (1.0 - miss) + 100.0 * min(k, n_images) / n_images
    return float(total)
