"""Small demo batches of unit embeddings, for the derivation notebooks and their explorers.

Deterministic in their seed and cheap: what a widget or a derivation needs for a live S, without
importing the trainer or the notebook settings (``vlr_lib.notebook`` re-exports them for the notebooks).
"""
from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_int, check_nonnegative
from .similarity import l2_normalize


def demo_embeddings(n: int = 8, dim: int = 16, noise: float = 0.8, seed: int = 0,
                    dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor]:
    """A toy batch of unit image and caption embeddings: caption i is image i plus noise.

    `noise` decides how hard the batch is (0: every positive at similarity 1).
    Deterministic in `seed`; used by the derivation notebooks for a small live S.
    ``demo_retrieval_batch(n, 1, dim, noise, seed)`` without the caption index.
    """
    img, txt, _ = demo_retrieval_batch(check_int("n", n, 2), 1, dim, noise, seed, dtype)
    return img, txt


def demo_retrieval_batch(n_images: int = 8, captions_per_image: int = 5, dim: int = 16, noise: float = 0.8,
                         seed: int = 0, dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor, Tensor]:
    """A toy evaluation set: unit image embeddings and `captions_per_image` noisy copies of each.

    Caption c of image i is norm(img_i + noise * eps_c), so `noise` sets the difficulty
    (0: every caption equals its image). Returns (img [N, dim], txt [N * k, dim],
    caption_to_image [N * k]), captions grouped by image as in Flickr30K.
    """
    n_images, dim = check_int("n_images", n_images, 2), check_int("dim", dim, 2)
    per = check_int("captions_per_image", captions_per_image, 1)
    noise = check_nonnegative("noise", noise)
    g = torch.Generator().manual_seed(seed)
    img = torch.randn(n_images, dim, generator=g, dtype=dtype)
    txt = img.repeat_interleave(per, 0)
    txt = txt + noise * torch.randn(txt.shape, generator=g, dtype=dtype)
    return l2_normalize(img), l2_normalize(txt), torch.arange(n_images).repeat_interleave(per)
