"""The joint embedding space: normalisation and the similarity matrix S.

S[i, j] is the cosine similarity of image i and caption j. Every loss in
vlr_lib is a function of S, and gradients reach the embeddings through
S = img @ txt.T (DESIGN.md, "the similarity-matrix contract").
"""
from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_tensor

_EPS = 1e-12  # keeps zero vectors finite; they map to the zero vector
#: The two retrieval directions: image queries over captions (rows of S), caption queries over images (columns).
DIRECTIONS: tuple[str, str] = ("i2t", "t2i")


def l2_normalize(x: Tensor, dim: int = -1) -> Tensor:
    """Scale each embedding to unit length along `dim` (the unit hypersphere of Li et al. sec. 3.3)."""
    check_tensor("x", x)
    return x / x.norm(dim=dim, keepdim=True).clamp_min(_EPS)


def similarity(img: Tensor, txt: Tensor) -> Tensor:
    """Cosine similarity matrix S = norm(img) @ norm(txt).T, shape [n_images, n_captions]."""
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
    """
    if caption_image_ids is None:
        caption_image_ids = image_ids
    if image_ids.dim() != 1 or caption_image_ids.dim() != 1:
        raise ValueError("image_ids and caption_image_ids must be 1-D tensors of ids")
    return image_ids[:, None] == caption_image_ids[None, :]
