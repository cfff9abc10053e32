"""Toy frozen features for the trainer's tests: each caption is its image's feature plus noise."""
from __future__ import annotations

import torch


def toy_features(n_images: int, per_image: int, dim: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """(img [n_images, dim], txt [n_images * per_image, dim], caption_to_image): txt = img[c2i] + 0.5 N(0, 1)."""
    g = torch.Generator().manual_seed(seed)
    img = torch.randn(n_images, dim, generator=g)
    c2i = torch.arange(n_images).repeat_interleave(per_image)
    return img, img[c2i] + 0.5 * torch.randn(n_images * per_image, dim, generator=g), c2i
