"""``fit``: train projection heads on fixed features with any loss of the workbook."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor, nn

from .._checks import check_int, check_tensor
from ..models import HEADS, make_head
from .engine import FitResult, data_fingerprint
from .launch import launch, prepare
from .objective import LossFn, Objective
from .settings import RUN, TrainSettings

#: One split's features: (img_feats [n_images, D], txt_feats [n_captions, D], caption_to_image [n_captions]).
Triple = tuple[Tensor, Tensor, Tensor]


# --------------------------------------------------------------------------- validation


def check_caption_to_image(name: str, c2i: object, n_images: int, n_captions: int) -> Tensor:
    """Long tensor [n_captions] with values in [0, n_images), every image with at least one caption."""
    if isinstance(c2i, (list, tuple, np.ndarray)):
        c2i = torch.as_tensor(np.asarray(c2i))
    if not isinstance(c2i, Tensor) or c2i.is_floating_point() or c2i.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor of image indices")
    if c2i.dim() != 1 or c2i.numel() != n_captions:
        raise ValueError(f"{name} must be 1-D with one entry per caption ({n_captions}), got shape {tuple(c2i.shape)}")
    c2i = c2i.long()
    if bool(((c2i < 0) | (c2i >= n_images)).any()):
        raise ValueError(f"{name} values must lie in [0, {n_images})")
    if bool((torch.bincount(c2i, minlength=n_images) == 0).any()):
        raise ValueError(f"{name} leaves an image without captions; every image needs one")
    return c2i


def _features(prefix: str, triple: object) -> Triple:
    if not isinstance(triple, (tuple, list)) or len(triple) != 3:
        raise TypeError(f"{prefix} must be a tuple (img_feats, txt_feats, caption_to_image)")
    img = check_tensor(f"{prefix} img_feats".strip(), triple[0], ndim=2)
    txt = check_tensor(f"{prefix} txt_feats".strip(), triple[1], ndim=2)
    c2i = check_caption_to_image(f"{prefix} caption_to_image".strip(), triple[2], img.shape[0], txt.shape[0])
    return img, txt, c2i


def _check_val_dims(train: Triple, val: Triple) -> None:
    for what, a, b in (("img_feats", train[0], val[0]), ("txt_feats", train[1], val[1])):
        if a.shape[1] != b.shape[1]:
            raise ValueError(f"val {what} has dimension {b.shape[1]} but the training {what} have {a.shape[1]}")


def _head_in_dim(name: str, head: nn.Module, feats: Tensor) -> None:
    """A given head must accept the features: check its declared in_dim, else try one row."""
    expected = getattr(head, "in_dim", None)
    if expected is None and isinstance(head, nn.Linear):
        expected = head.in_features
    if expected is not None and expected != feats.shape[1]:
        raise ValueError(f"{name} has dimension {feats.shape[1]} but its head expects {expected}")


# --------------------------------------------------------------------------- heads


def build_heads(head: str | tuple, img_dim: int, txt_dim: int, dim: int, seed: int) -> tuple[nn.Module, nn.Module]:
    """Two heads initialised from `seed` without touching the global RNG."""
    if isinstance(head, (tuple, list)):
        if len(head) != 2 or not all(isinstance(h, nn.Module) for h in head):
            raise TypeError("head must be 'linear', 'mlp' or a pair (img_head, txt_head) of nn.Modules")
        return head[0], head[1]
    if head not in HEADS:
        raise ValueError(f"head must be one of {tuple(HEADS)} or a pair of modules, got {head!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make_head(head, img_dim, dim), make_head(head, txt_dim, dim)


# --------------------------------------------------------------------------- fit


def fit(
    img_feats: Tensor,
    txt_feats: Tensor,
    caption_to_image: Tensor,
    loss: str | LossFn | Objective = "unified",
    loss_kwargs: Mapping | None = None,
    *,
    head: str | tuple[nn.Module, nn.Module] = "linear",
    dim: int = RUN["features"]["dim"],
    val: Triple | None = None,
    settings: TrainSettings | None = None,
    **overrides,
) -> FitResult:
    """Train an image head and a text head on fixed features with `loss`; record one history row per epoch.

    Data: ``img_feats`` [n_images, D_img], ``txt_feats`` [n_captions, D_txt],
    ``caption_to_image`` [n_captions] (the image of each caption); ``val`` is the
    same triple for the validation split (None: no retrieval metrics).

    Loss: a loss name of ``vlr_lib.registry``: a closed-form loss, a GOAL combination "goal:T,P"
    (``vlr_lib.goal``), or a callable ``(S, pos_mask=None) -> scalar``;
    ``loss_kwargs`` go to it (unknown ones are an error). Or an ``Objective`` that
    ``build_objective`` built and checked where the call was read (no ``loss_kwargs``). Row-wise losses
    (sampled_softmax, cross_example_softmax, smooth_ap) are applied in both
    directions, ``loss(S) + loss(S.T)`` (see ``vlr_lib.train.objective``).

    Model: two heads, ``head`` = "linear" / "mlp" (``vlr_lib.models``) into a ``dim``-d
    joint space, or a pair of modules.

    Training: ``settings`` (a :class:`~vlr_lib.train.settings.TrainSettings`; default
    epochs=10, batch_size=128, lr=2e-4, lr_decay_epoch=None, sampling="captions",
    probe_batch=None, seed=0, device=None, callbacks=(), checkpoint_dir=None,
    resume=True, progress=True), each field overridable by keyword: ``fit(..., epochs=3)``.
    The VSE++ / Li et al. recipe: each epoch visits every caption once
    (``sampling="captions"``; "images": one random caption per image) in batches of
    ``batch_size`` captions with their images; images repeated in a batch are masked as
    false negatives. Adam at ``lr``, x0.1 from epoch ``lr_decay_epoch`` (0-based; None:
    halfway). bf16 autocast on CUDA only. The same seed gives the same history on CPU.
    Under ``torchrun`` each rank embeds its share of every batch and the loss sees the
    whole batch (``vlr_lib.train.distributed``).

    History (``FitResult.history``, one dict per epoch): epoch, loss (mean over
    batches), lr, steps, i2t_r1/5/10, t2i_r1/5/10, rsum (percent), map5 (i2t
    mAP@5) and pr_auc (fractions in [0, 1]), pos_sim, hardneg_sim on ``val``
    (``vlr_lib.train.evaluate``), cocos (``analysis.cocos`` on a fixed probe batch
    of ``probe_batch`` distinct training images; None when the loss has no COCOS
    rule; ``probe_batch=0`` turns it off), train_seconds and seconds (wall time).

    Checkpoints: with ``checkpoint_dir`` the state is saved atomically after every
    epoch, and ``resume=True`` continues from it (same result as an
    uninterrupted run). A NaN/inf loss raises ``TrainingDivergedError`` and keeps
    the last good checkpoint. ``callbacks``: ``cb(record, result)`` after every
    epoch; a callback may add JSON-serialisable keys to the epoch's record, which
    are kept in the history and in that epoch's checkpoint (written after the
    callbacks, also when one raises); see ``vlr_lib.train.engine``.
    """
    train = _features("", (img_feats, txt_feats, caption_to_image))
    val_t = _features("val", val) if val is not None else None
    if val_t is not None:
        _check_val_dims(train, val_t)
    settings, objective = prepare(settings, overrides, train[0].shape[0], loss, loss_kwargs)
    dim = check_int("dim", dim, 1)
    models = build_heads(head, train[0].shape[1], train[1].shape[1], dim, settings.seed)
    _head_in_dim("img_feats", models[0], train[0])
    _head_in_dim("txt_feats", models[1], train[1])
    return launch(models, train, val_t, objective, settings, features_config(objective, head, dim, train, val_t))


def features_config(objective: Objective, head: str | tuple, dim: int, train: Triple, val: Triple | None) -> dict:
    """The configuration a features run records and fingerprints in its checkpoints (``launch`` adds the settings)."""
    return {
        "mode": "features",
        "loss": objective.name,
        "loss_kwargs": objective.kwargs,
        "head": head if isinstance(head, str) else "custom",
        "dim": dim,
        "data": data_fingerprint(*train),
        "val": data_fingerprint(*val) if val is not None else None,
    }
