"""Test doubles for the feature extractors: a CLIP backbone's identity without the model or its download."""
from __future__ import annotations

import numpy as np
import torch

from vlr_lib.features import Encoder, hashed_bow


class FakeClip(Encoder):
    """The CLIP backbone's identity (backbone, weights tag, image size) with tiny features and no model."""

    backbone, init_seed, image_size, dim = "clip-vit-b32", None, 224, 12
    device = torch.device("cpu")

    def __init__(self, pretrained: str = "openai"):
        self.pretrained = pretrained

    @staticmethod
    def transform(image) -> torch.Tensor:
        return torch.from_numpy(np.asarray(image.convert("RGB").resize((2, 2)), dtype=np.float32)).reshape(-1)

    def encode_images(self, pixels: torch.Tensor) -> torch.Tensor:
        return pixels

    def encode_texts(self, texts) -> torch.Tensor:
        return hashed_bow(texts, self.dim)
