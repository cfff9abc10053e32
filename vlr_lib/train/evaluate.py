"""What the trainer records after every epoch: retrieval metrics, similarity gaps, COCOS.

Retrieval metrics of a split (:func:`split_metrics`, from its similarity
matrix): R@1/5/10 in both directions and rsum (``metrics.retrieval_metrics``,
percent, 0-100 per recall); ``map5``, mAP@5 of image -> text (Bleeker & de Rijke
eq. 5, ``metrics.map_at_k`` with k=5) and ``pr_auc``, the area under the
precision-recall curve over all image-caption pairs (Veit & Wilber,
``metrics.pr_auc``), both *fractions* in [0, 1]; pos_sim and hardneg_sim below.

Positive and hardest-negative similarity (Li et al. Fig. 4). The paper plots
"similarities of positive and hardest negative sample pairs on the validation
set" per epoch without a formula; we use, on the validation matrix S
[n_images, n_captions] with C_i the captions of image i,

    pos_sim     = mean_i  mean_{c in C_i}  S[i, c]
    hardneg_sim = mean_i  max_{c not in C_i} S[i, c]

i.e. per image its captions' mean similarity against its most similar wrong
caption (the negative that Triplet-HN would pick over the whole set), both
averaged over images. Triplet-HN's early collapse shows as both near 1.
"""
from __future__ import annotations

import contextlib
import inspect
from collections.abc import Mapping

import torch
from torch import Tensor, nn

from .. import analysis, metrics, registry
from .sampling import _one_caption_per_image, epoch_generator

_EVAL_CHUNK = 2048  # inputs per forward pass when embedding a whole split
_ROW_CHUNK = 256  # image rows of S per block for the similarity statistics


def autocast_dtype(device: str | torch.device, model: nn.Module | None = None) -> torch.dtype | None:
    """The mixed-precision dtype of `model` on `device`: bfloat16, or None for plain float32.

    bfloat16 only on a CUDA device that computes it natively (``torch.cuda.is_bf16_supported``
    without emulation: Ampere or newer); it keeps float32's range, so no GradScaler is needed.
    Never for a model with a recurrent layer (the GRU text encoder): under autocast cuDNN runs
    RNNs in reduced precision, and nothing would scale their gradients. CPUs and MPS: None,
    so CPU runs stay exact and repeatable.
    """
    device = torch.device(device)
    if device.type != "cuda" or not _native_bf16():
        return None
    if model is not None and any(isinstance(m, nn.RNNBase) for m in model.modules()):
        return None
    return torch.bfloat16


def _native_bf16() -> bool:
    try:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # torch < 2.4 has no emulation and no such argument
        return torch.cuda.is_bf16_supported()


def autocast(dtype: torch.dtype | None):
    """CUDA autocast at `dtype` (from :func:`autocast_dtype`); None: no autocast."""
    return torch.autocast(device_type="cuda", dtype=dtype) if dtype is not None else contextlib.nullcontext()


def autocast_for(device: str | torch.device, model: nn.Module | None = None):
    """The autocast context of `model` on `device` (:func:`autocast_dtype`)."""
    return autocast(autocast_dtype(device, model))


@torch.no_grad()
def embed(model: nn.Module, data: Tensor, chunk: int = _EVAL_CHUNK) -> Tensor:
    """Embed `data` (first dim = examples) in chunks, in eval mode, as float32."""
    was_training = model.training
    model.eval()
    try:
        with autocast_for(data.device, model):
            return torch.cat([model(data[a : a + chunk]).float() for a in range(0, data.shape[0], chunk)])
    finally:
        model.train(was_training)


@torch.no_grad()
def similarity_stats(S: Tensor, caption_to_image: Tensor) -> dict[str, float]:
    """pos_sim and hardneg_sim of the module docstring, in blocks of rows."""
    pos_total, neg_total = 0.0, 0.0
    for a in range(0, S.shape[0], _ROW_CHUNK):
        block = S[a : a + _ROW_CHUNK]
        rows = torch.arange(a, a + block.shape[0], device=S.device)
        pos = caption_to_image[None, :] == rows[:, None]
        pos_total += float(((block * pos).sum(dim=1) / pos.sum(dim=1)).sum())
        neg_total += float(block.masked_fill(pos, float("-inf")).amax(dim=1).sum())
    return {"pos_sim": pos_total / S.shape[0], "hardneg_sim": neg_total / S.shape[0]}


@torch.no_grad()
def split_metrics(S: Tensor, caption_to_image: Tensor) -> dict[str, float]:
    """Every metric of the module docstring from one split's S [n_images, n_captions].

    Keys, in order: i2t_r{k}, t2i_r{k} (k in 1, 5, 10 up to the split's size),
    rsum (percent); map5, pr_auc (fractions); pos_sim, hardneg_sim (cosines).
    """
    ks = tuple(k for k in (1, 5, 10) if k <= min(S.shape))
    out = metrics.retrieval_metrics(S, caption_to_image, ks=ks)
    out["map5"] = metrics.map_at_k(S, caption_to_image, k=5)
    out["pr_auc"] = metrics.pr_auc(S, caption_to_image)
    out.update(similarity_stats(S, caption_to_image))
    return out


@torch.no_grad()
def evaluate(
    img_model: nn.Module, txt_model: nn.Module, img_data: Tensor, txt_data: Tensor, caption_to_image: Tensor
) -> dict[str, float]:
    """:func:`split_metrics` of one split embedded by the two models (R@K, rsum, map5, pr_auc, similarities)."""
    return split_metrics(embed(img_model, img_data) @ embed(txt_model, txt_data).T, caption_to_image)


def probe_indices(caption_to_image: Tensor, n_images: int, size: int, seed: int) -> Tensor:
    """A fixed probe batch: `size` distinct images, one caption each, drawn from `seed` (caption indices)."""
    g = epoch_generator(seed, -1, caption_to_image.device)  # epoch -1: a stream no training epoch uses
    pool = _one_caption_per_image(caption_to_image, n_images, g)
    return pool[torch.randperm(pool.numel(), generator=g, device=pool.device)[:size]]


def cocos_loss_name(loss_name: str) -> str | None:
    """The COCOS rule of a training loss (its registry entry's), or None for the others."""
    return registry.cocos_rules().get(loss_name)


@torch.no_grad()
def probe_cocos(
    img_model: nn.Module,
    txt_model: nn.Module,
    img_data: Tensor,
    txt_data: Tensor,
    caption_to_image: Tensor,
    probe: Tensor,
    loss_name: str,
    loss_kwargs: Mapping,
) -> dict | None:
    """COCOS counts (``analysis.cocos``) of the probe batch's S, or None when the loss has no COCOS rule."""
    name = cocos_loss_name(loss_name)
    if name is None or probe.numel() < 2:
        return None
    S = embed(img_model, img_data[caption_to_image[probe]]) @ embed(txt_model, txt_data[probe]).T
    accepted = inspect.signature(analysis.cocos).parameters
    kwargs = {k: v for k, v in loss_kwargs.items() if k in accepted and k not in ("S", "loss")}
    counts = analysis.cocos(S, loss=name, **kwargs)
    # Keep the per-batch summaries; the per-query vector C_q does not belong in a history row.
    return {d: {k: _plain(v) for k, v in c.items() if k != "C_q"} for d, c in counts.items()}


def _plain(x):
    """Tensors and numbers to Python floats/ints, recursively (history is stored as JSON)."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, Tensor):
        return x.item() if x.numel() == 1 else x.tolist()
    if isinstance(x, bool) or x is None or isinstance(x, (int, str)):
        return x
    return float(x)
