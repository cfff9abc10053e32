"""The joint embedding space: normalisation, the similarity matrix S, its positives and hardest negatives.

S[i, j] is the cosine similarity of image i and caption j. Every loss in
vlr_lib is a function of S, and gradients reach the embeddings through
S = img @ txt.T (the S contract, docs/architecture.md).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from ._checks import check_choice, check_similarity, check_tensor

_EPS = 1e-12  # keeps zero vectors finite; they map to the zero vector
#: The two retrieval directions: image queries over captions (rows of S), caption queries over images (columns).
DIRECTIONS: tuple[str, str] = ("i2t", "t2i")


def l2_normalize(x: Tensor, dim: int = -1) -> Tensor:
    """Scale each embedding to unit length along `dim` (the unit hypersphere of Li et al. sec. 3.3).

    Derived in notebooks/01_embedding_and_evaluation.py.
    """
    check_tensor("x", x)
    return x / x.norm(dim=dim, keepdim=True).clamp_min(_EPS)


def similarity(img: Tensor, txt: Tensor) -> Tensor:
    """Cosine similarity matrix S = norm(img) @ norm(txt).T, shape [n_images, n_captions].

    Derived in notebooks/01_embedding_and_evaluation.py.
    """
    check_tensor("img", img, ndim=2)
    check_tensor("txt", txt, ndim=2)
    if img.shape[1] != txt.shape[1]:
        raise ValueError(f"img and txt must share the embedding dimension, got {img.shape[1]} and {txt.shape[1]}")
    return l2_normalize(img) @ l2_normalize(txt).T


def positive_mask(image_ids: Tensor, caption_image_ids: Tensor | None = None) -> Tensor:
    """Bool mask [n_images, n_captions]: True where caption j describes image i.

    With one id tensor, rows and columns are the same batch (image k of the
    batch paired with caption k); a repeated image id marks its other captions as
    positives, which masks false negatives.

    Derived in notebooks/01_embedding_and_evaluation.py.
    """
    if caption_image_ids is None:
        caption_image_ids = image_ids
    if image_ids.dim() != 1 or caption_image_ids.dim() != 1:
        raise ValueError("image_ids and caption_image_ids must be 1-D tensors of ids")
    return image_ids[:, None] == caption_image_ids[None, :]


class Hardest(NamedTuple):
    """The hardest negative of every query: its score and its index among the query's candidates."""

    values: Tensor
    indices: Tensor


def hardest_negatives(S: Tensor, neg: Tensor) -> Hardest:
    """Score and column of the hardest (highest-scoring) negative of every row of S; `neg` marks the negatives.

    The one hardest-negative finder of vlr_lib (VSE++'s max of hinges, Faghri et al.;
    Bleeker & de Rijke eq. 1; GOAL's triplets, Xuan & Chen sec. 3.1). Among tied
    negatives torch.max picks one index, the first, so the gradient of the max
    reaches a single entry, as in VSE++. Pass S.T and neg.T for caption queries.

    Derived in notebooks/02_triplet_losses.py.
    """
    values, indices = S.masked_fill(~neg, -math.inf).max(dim=1)
    return Hardest(values, indices)


def _hardest_negatives_diagonal(S: Tensor) -> tuple[Hardest, Hardest, Tensor]:
    """:func:`hardest_negatives` of the row queries and of the column queries at once, for positives on the diagonal:
    the fast path of the losses and GOAL (private: the one finder callers use is :func:`hardest_negatives`).

    Returns (rows, columns, W): rows.values[i] / rows.indices[i] is the hardest negative of row i
    (column index), columns.values[j] / columns.indices[j] that of column j (row index), and W is
    S with its diagonal set to -inf (the negatives, for callers that read them again). Ties pick
    the first index, as torch.max does. One copy of S and two reductions: the column maximum is
    taken along dim 0 (amax) and its row is the first that attains it, which on the CPU is several
    times faster than ``S.max(dim=0)`` or a transposed copy.
    """
    W = S.clone()
    W.diagonal().fill_(-math.inf)
    row_val, row_idx = W.max(dim=1)
    col_val = W.amax(dim=0)
    n = W.shape[0]
    order = torch.arange(n, device=W.device, dtype=torch.int32)[:, None]
    col_idx = torch.where(W == col_val, order, n).amin(dim=0).long()
    return Hardest(row_val, row_idx), Hardest(col_val, col_idx), W


def hardest_negative_mask(S: Tensor, pos_mask: Tensor | None = None, direction: str = "i2t") -> Tensor:
    """Bool mask of S's shape: True at the hardest negative of every image query (row, "i2t") or
    caption query (column, "t2i"); one per query, chosen by :func:`hardest_negatives`.

    Derived in notebooks/02_triplet_losses.py.
    """
    check_choice("direction", direction, DIRECTIONS)
    S, pos = check_similarity(S, pos_mask, both_directions=direction == "t2i")
    S_q, neg = (S, pos.neg) if direction == "i2t" else (S.T, pos.neg.T)
    mask = torch.zeros_like(neg)
    mask[torch.arange(S_q.shape[0], device=S.device), hardest_negatives(S_q, neg).indices] = True
    return mask if direction == "i2t" else mask.T
