"""The CUDA-only decisions of the trainer and the extractor, checked on the CPU (no GPU here).

Mixed precision: bf16 autocast only on a CUDA device with native bf16, never around a recurrent
layer; the engine asks for each model separately. Extraction: GPU-sized loader defaults on
CUDA, the old CPU defaults elsewhere (same numbers).
"""
from __future__ import annotations

import contextlib
import os

import numpy as np
import pytest
import torch
from torch import nn

from vlr_lib import features as V
from vlr_lib.models import TextBag, TextGRU, TinyCNN
from vlr_lib.train import engine, fit_end_to_end
from vlr_lib.train.evaluate import autocast, autocast_dtype


@pytest.fixture
def bf16(monkeypatch):
    """Pretend torch reports native bf16 support (as on an A100/H100); record how it was asked."""
    asked = []

    def supported(including_emulation=True):
        asked.append(including_emulation)
        return True

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", supported)
    return asked


def test_autocast_only_on_cuda_with_native_bf16(bf16, monkeypatch):
    head = nn.Linear(4, 4)
    assert autocast_dtype("cpu", head) is None
    assert autocast_dtype(torch.device("cuda", 0), head) is torch.bfloat16
    assert bf16 == [False], "emulated bf16 (pre-Ampere) must not count"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)
    assert autocast_dtype("cuda", head) is None


def test_recurrent_models_stay_out_of_autocast(bf16):
    assert autocast_dtype("cuda", TextGRU(50, 8)) is None
    assert autocast_dtype("cuda", nn.Sequential(nn.Linear(2, 2), nn.LSTM(2, 2))) is None
    assert autocast_dtype("cuda", TextBag(50, 8)) is torch.bfloat16
    assert autocast_dtype("cuda", TinyCNN(8, 4)) is torch.bfloat16
    assert isinstance(autocast(None), contextlib.nullcontext)


def test_the_engine_asks_for_each_model(monkeypatch):
    """End to end with the GRU: on a bf16 GPU the CNN would run under autocast, the GRU outside it."""
    from vlr_lib.data import make_shapes

    decided, entered = {}, []

    def decide(device, model):
        decided[type(model).__name__] = torch.bfloat16 if not isinstance(model, TextGRU) else None
        return decided[type(model).__name__]

    monkeypatch.setattr(engine, "autocast_dtype", decide)
    monkeypatch.setattr(engine, "autocast", lambda dtype: entered.append(dtype) or contextlib.nullcontext())
    fit_end_to_end(make_shapes(16, 8, 1, seed=0), "info_nce", epochs=1, batch_size=8, dim=8, width=4,
                   progress=False, probe_batch=0)
    assert decided == {"TinyCNN": torch.bfloat16, "TextGRU": None}
    assert entered[:2] == [torch.bfloat16, None] and len(entered) == 2 * 2  # two steps, one context per model


class _Identity(V.Encoder):
    """An encoder that returns its inputs: the loader's batches are the features."""

    backbone, pretrained, init_seed, image_size, dim = "clip-vit-b32", "none", 0, 224, 12

    def __init__(self, device: str):
        self.device = torch.device(device)

    @staticmethod
    def transform(image) -> torch.Tensor:
        return torch.from_numpy(np.asarray(image.convert("RGB").resize((2, 2)), dtype=np.float32)).reshape(-1)

    def encode_images(self, pixels):
        return pixels

    def encode_texts(self, texts):
        return V.hashed_bow(texts, self.dim)


def test_extraction_loader_follows_the_device(monkeypatch):
    from vlr_lib.data import make_shapes

    made, real = [], torch.utils.data.DataLoader

    def loader(dataset, **kwargs):
        made.append(kwargs)
        return real(dataset, **{**kwargs, "pin_memory": False})  # no GPU to pin for

    monkeypatch.setattr(torch.utils.data, "DataLoader", loader)
    ds = make_shapes(3, 1, 1, seed=0)["train"]
    on_cpu = V.extract_features(ds, _Identity("cpu"), progress=False)
    on_gpu = V.extract_features(ds, _Identity("cuda"), progress=False)  # a device attribute; the math stays here
    # two loaders per extraction: the images, then the captions' tokens (one batch of captions per item)
    assert made[0] == {"batch_size": 64, "num_workers": 0, "pin_memory": False}
    assert made[1] == {**made[0], "batch_size": None}
    assert made[2] == {"batch_size": 256, "num_workers": min(8, os.cpu_count() or 1), "pin_memory": True}
    assert made[3] == {**made[2], "batch_size": None}
    assert all(torch.equal(a, b) for a, b in zip(on_cpu, on_gpu))
