"""End-to-end mode: a tiny CNN and a tiny text encoder trained from scratch on the shapes data (CPU).

The same loop, losses and history as :func:`vlr_lib.train.fit`; only the two
models change -- ``models.TinyCNN`` on the 64 x 64 images and ``models.TextGRU``
(or ``TextBag``) on captions tokenised with a vocabulary of the training
captions. Images and token ids are tensors indexed by example, so batches are
drawn on the device exactly as for cached features.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from .._checks import check_int
from ..models import TEXT_ENCODERS, TinyCNN, Vocabulary, make_text_encoder
from .engine import FitResult, data_fingerprint
from .inputs import flat_captions, shapes_images
from .launch import prepare
from .vsepp import caption_triple, launch_with_text, token_inputs
from .objective import LossFn, Objective
from .settings import RUN, TrainSettings


def shapes_tensors(split, vocab: Vocabulary | None = None) -> tuple[Tensor, Tensor, Tensor, Vocabulary]:
    """One split of a shapes/Flickr30K-schema dataset as tensors.

    Returns (images uint8 [N, 3, H, W], token ids [n_captions, L], caption_to_image
    [n_captions], vocab); the vocabulary is built from this split's captions when
    not given (pass the training vocabulary for validation / test).
    """
    flat, c2i = flat_captions(split)
    vocab = vocab or Vocabulary.build(flat)
    return shapes_images(split), vocab.encode(flat), c2i, vocab


def fit_end_to_end(
    dataset_dict,
    loss: str | LossFn | Objective = "unified",
    loss_kwargs: Mapping | None = None,
    *,
    text_encoder: str = "gru",
    dim: int = RUN["e2e"]["dim"],
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
    chance rsum. :func:`fit_encoders` is the same on tensors.
    """
    for name in (train_split, val_split):
        if name is not None and name not in dataset_dict:
            raise ValueError(f"{'train_split' if name == train_split else 'val_split'} {name!r} is not in the dataset")
    if text_encoder not in TEXT_ENCODERS:
        raise ValueError(f"text_encoder must be one of {tuple(TEXT_ENCODERS)}, got {text_encoder!r}")
    img, txt, c2i, vocab = shapes_tensors(dataset_dict[train_split])
    val = shapes_tensors(dataset_dict[val_split], vocab)[:3] if val_split else None
    result = fit_encoders(img, txt, c2i, loss, loss_kwargs, val=val, text_encoder=text_encoder, dim=dim, width=width,
                          settings=settings, **overrides)
    result.extras["vocab"] = vocab
    return result


def fit_encoders(
    images: Tensor,
    captions: Sequence[str] | Tensor,
    caption_to_image: Tensor,
    loss: str | LossFn | Objective = "unified",
    loss_kwargs: Mapping | None = None,
    *,
    val: tuple | None = None,
    text_encoder: str = "gru",
    dim: int = RUN["e2e"]["dim"],
    width: int = 32,
    min_count: int = 1,
    settings: TrainSettings | None = None,
    **overrides,
) -> FitResult:
    """:func:`fit_end_to_end` on tensors: images uint8 [N, 3, H, W] (or float in [0, 1]), the captions' texts
    or token ids [n_captions, L] (as :func:`vlr_lib.train.fit_vsepp` takes them), caption_to_image."""
    train = caption_triple("", (images, captions, caption_to_image), image_dims=4)
    val_t = caption_triple("val", val, image_dims=4) if val is not None else None
    train, val_t, vocab, vocab_size = token_inputs(train, val_t, min_count)
    settings, objective = prepare(settings, overrides, train[0].shape[0], loss, loss_kwargs, end_to_end=True)
    dim, width = check_int("dim", dim, 1), check_int("width", width, 2)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings.seed)
        models = (TinyCNN(dim, width), make_text_encoder(text_encoder, vocab_size, dim))
    config = {
        "mode": "end_to_end",
        "loss": objective.name,
        "loss_kwargs": objective.kwargs,
        "text_encoder": text_encoder,
        "dim": dim,
        "width": width,
        "vocab_size": vocab_size,
        "data": data_fingerprint(*train),
    }
    return launch_with_text(models, train, val_t, objective, settings, config, vocab)
