"""End-to-end mode: a tiny CNN and a tiny text encoder trained from scratch on the shapes data (CPU).

The same loop, losses and history as :func:`vlr_lib.train.fit`; only the two
models change -- ``models.TinyCNN`` on the 64 x 64 images and ``models.TextGRU``
(or ``TextBag``) on captions tokenised with a vocabulary of the training
captions. Images and token ids are tensors indexed by example, so batches are
drawn on the device exactly as for cached features.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import torch
from torch import Tensor

from ..models import TEXT_ENCODERS, TinyCNN, Vocabulary
from . import distributed as D
from .engine import FitResult, Plan, Split, data_fingerprint, train_models
from .._checks import check_int
from .device import default_device
from .objective import LossFn, make_objective
from .settings import TrainSettings, settings_for


def shapes_tensors(split, vocab: Vocabulary | None = None) -> tuple[Tensor, Tensor, Tensor, Vocabulary]:
    """One split of a shapes/Flickr30K-schema dataset as tensors.

    Returns (images uint8 [N, 3, H, W], token ids [n_captions, L], caption_to_image
    [n_captions], vocab); the vocabulary is built from this split's captions when
    not given (pass the training vocabulary for validation / test).
    """
    images = np.stack([np.asarray(im.convert("RGB")) for im in split["image"]])
    caps = split["caption"]
    flat = [c for five in caps for c in five]
    vocab = vocab or Vocabulary.build(flat)
    c2i = torch.repeat_interleave(torch.arange(len(caps)), torch.tensor([len(c) for c in caps]))
    return torch.from_numpy(images).permute(0, 3, 1, 2).contiguous(), vocab.encode(flat), c2i, vocab


def chance_rsum(caption_to_image: Tensor | Sequence[int], ks: tuple[int, ...] = (1, 5, 10)) -> float:
    """Expected rsum of a random ranking (in percent), the floor every trained model must clear.

    With M captions, N images and n_i captions of image i, a uniformly random order gives
    i2t R@K = mean_i [1 - C(M - n_i, K) / C(M, K)] (none of i's captions in the top K)
    and t2i R@K = K / N (the one true image among N). Five captions per image and
    N = 200: 0.5 + 2.5 + 4.9 (i2t) + 0.5 + 2.5 + 5.0 (t2i) = 15.9. Recalls at K larger than the
    split (fewer than K images) are left out, as ``evaluate.split_metrics`` leaves them out.
    """
    c2i = torch.as_tensor(caption_to_image)
    counts = torch.bincount(c2i).tolist()
    n_images, n_caps = len(counts), int(c2i.numel())
    total = 0.0
    for k in (k for k in ks if k <= min(n_images, n_caps)):  # the recalls evaluate.split_metrics reports
        miss = np.mean([math.comb(n_caps - n, k) / math.comb(n_caps, k) for n in counts])
        total += 100.0 * (1.0 - miss) + 100.0 * min(k, n_images) / n_images
    return float(total)


def fit_end_to_end(
    dataset_dict,
    loss: str | LossFn = "unified",
    loss_kwargs: Mapping | None = None,
    *,
    text_encoder: str = "gru",
    dim: int = 64,
    width: int = 32,
    train_split: str = "train",
    val_split: str | None = "validation",
    settings: TrainSettings | None = None,
    **overrides,
) -> FitResult:
    """Train ``TinyCNN`` + a text encoder ("gru" or "bag") from scratch on a shapes DatasetDict.

    Arguments as in :func:`vlr_lib.train.fit`, except: the data is a DatasetDict
    in the Flickr30K schema (``vlr_lib.data.shapes.make_shapes()``); ``dim`` is
    the joint space size; ``width`` the CNN width; the settings default to
    ``TrainSettings.end_to_end()``: 20 epochs of "images" sampling (one random caption
    per image per epoch: 5x cheaper epochs, which matters when the image encoder is
    trained), small batches (32; from scratch, the number of steps matters more than
    the batch) and lr 2e-3. ``result.extras`` holds the vocabulary and the validation
    chance rsum.
    """
    settings = settings_for(settings, overrides, end_to_end=True)
    for name in (train_split, val_split):
        if name is not None and name not in dataset_dict:
            raise ValueError(f"{'train_split' if name == train_split else 'val_split'} {name!r} is not in the dataset")
    if text_encoder not in TEXT_ENCODERS:
        raise ValueError(f"text_encoder must be one of {tuple(TEXT_ENCODERS)}, got {text_encoder!r}")
    img, txt, c2i, vocab = shapes_tensors(dataset_dict[train_split])
    val = shapes_tensors(dataset_dict[val_split], vocab)[:3] if val_split else None
    rank, world = D.rank_and_world()
    settings = settings.resolve(img.shape[0], world)
    dim, width = check_int("dim", dim, 1), check_int("width", width, 2)
    objective = make_objective(loss, loss_kwargs)
    objective.check(settings.batch_size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings.seed)
        models = (TinyCNN(dim, width), TEXT_ENCODERS[text_encoder](len(vocab), dim))
    config = {
        "mode": "end_to_end",
        "loss": objective.name,
        "loss_kwargs": objective.kwargs,
        "text_encoder": text_encoder,
        "dim": dim,
        "width": width,
        "vocab_size": len(vocab),
        **{k: v for k, v in settings.experiment().items() if k != "epochs"},
        "data": data_fingerprint(img, txt, c2i),
        "world_size": world,
    }
    plan = Plan(objective, replace(settings, progress=settings.progress and rank == 0), config)
    dev = default_device(settings.device)
    models = (models[0].to(dev), models[1].to(dev))
    split = Split(img.to(dev), txt.to(dev), c2i.to(dev), img.shape[0])
    val_split_t = Split(val[0].to(dev), val[1].to(dev), val[2].to(dev), val[0].shape[0]) if val else None
    result = train_models(models, split, val_split_t, plan)
    result.extras.update(vocab=vocab, chance_rsum=chance_rsum(val[2]) if val else None)
    return result


@torch.no_grad()
def shapes_features(dataset_dict, seed: int = 0, width: int = 32, splits: Sequence[str] = ("train", "validation")):
    """Frozen *random* features of a shapes DatasetDict: {split: (img_feats, txt_feats, caption_to_image)}.

    Images: the pooled maps of a randomly initialised ``TinyCNN`` (seeded, never
    trained; random convolutions still respond to colour and position), standardised
    per dimension with the statistics of the first split in `splits`. Captions:
    ``vlr_lib.features.hashed_bow`` (unigrams + bigrams, 2048 buckets). The
    heads-on-features mode for the shapes data when no pretrained backbone is wanted.
    """
    from ..features import hashed_bow

    n_first = len(dataset_dict[splits[0]])
    if n_first < 2:  # one image has no spread to standardise with (std would be NaN)
        raise ValueError(f"shapes_features needs at least 2 images in split {splits[0]!r}, got {n_first}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        cnn = TinyCNN(8, width).eval()
    out, stats = {}, None
    for name in splits:
        images, _, c2i, _ = shapes_tensors(dataset_dict[name], Vocabulary([]))
        feats = torch.cat([cnn.pooled(images[a : a + 512]) for a in range(0, images.shape[0], 512)])
        # Random conv maps are tiny and offset (std ~1e-3): standardise with the first split's statistics.
        stats = stats or (feats.mean(dim=0), feats.std(dim=0).clamp_min(1e-8))
        texts = [c for five in dataset_dict[name]["caption"] for c in five]
        out[name] = ((feats - stats[0]) / stats[1], hashed_bow(texts), c2i)
    return out
