"""The VSE++ setting: frozen image features + a GRU text encoder trained from scratch with the loss.

VSE++ (Faghri et al., "VSE++: Improving Visual-Semantic Embeddings with Hard Negatives")
embeds an image by a linear projection of a frozen ImageNet CNN's features and a caption by a
GRU over word embeddings learned from scratch on the training captions' vocabulary. Bleeker &
de Rijke ("Do Lessons from Metric Learning Generalize to Image-Caption Retrieval?", Table 1,
appendix B.3) compare the losses in exactly this setting, the CNN frozen for the whole run.
Li et al. train VSE++ (BUTD) the same way (a GRU text encoder, their sec. 4.1).

:func:`fit_vsepp` is that setting on this project's engine: the image head is a
``models.LinearHead`` / ``MLPHead`` on cached image features (the shapes data's pretrained
encoder, or CLIP / ResNet features of Flickr30K), the text side a ``models.TextGRU`` (or
``TextBag``) over token ids. Same loop, losses, settings and history as ``fit``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from .._checks import check_int, check_tensor
from ..models import Vocabulary, make_head, make_text_encoder
from .engine import FitResult, data_fingerprint
from .fit_features import check_caption_to_image
from .launch import Inputs, launch, prepare
from .objective import LossFn, Objective
from .settings import PRESETS, TrainSettings

#: The VSE++ text encoder of Faghri et al.: 300-d word embeddings, a 1024-d GRU, a 1024-d joint space.
VSEPP_SIZES = {k: PRESETS["flickr30k", "vsepp"][k] for k in ("word_dim", "hidden", "dim")}


def _no_words(name: str, txt: Tensor) -> ValueError:
    return ValueError(
        f"{name} must be the captions (a list of str) or their token ids (an integer tensor [n_captions, L], "
        f"vlr_lib.train.caption_ids) for the VSE++ setting, which trains a text encoder on the words; got float "
        f"caption features of shape {tuple(txt.shape)}, which have no words (train heads on them with "
        f"vlr_lib.train.fit, setting 'features')")


def _caption_inputs(name: str, captions: object) -> Tensor | list[str]:
    """Token ids as given, or the texts to tokenise; caption *features* are the clear error of the module."""
    if isinstance(captions, Tensor):
        if captions.is_floating_point():
            raise _no_words(name, captions)
        if captions.dtype == torch.bool or captions.dim() != 2 or captions.numel() == 0:
            raise ValueError(f"{name} token ids must be an integer tensor [n_captions, L] with L >= 1, "
                             f"got {captions.dtype} {tuple(captions.shape)}")
        if bool((captions < 0).any()):
            raise ValueError(f"{name} token ids must be >= 0 (0 pads, 1 is unknown)")
        return captions.long()
    if isinstance(captions, (str, bytes)) or not isinstance(captions, Sequence) \
            or not all(isinstance(c, str) for c in captions):
        raise TypeError(f"{name} must be a list of caption strings or an integer tensor of token ids, "
                        f"got {type(captions).__name__}")
    return list(captions)


def caption_triple(prefix: str, triple: object, image_dims: int = 2) -> tuple[Tensor, Tensor | list[str], Tensor]:
    """(image inputs, captions as texts or token ids, caption_to_image), checked; image inputs are features
    [N, D] (`image_dims` 2) or images [N, 3, H, W] (4)."""
    what = "img_feats" if image_dims == 2 else "images"
    if not isinstance(triple, (tuple, list)) or len(triple) != 3:
        raise TypeError(f"{prefix} must be a tuple ({what}, captions, caption_to_image)".strip())
    img = triple[0]
    if not isinstance(img, Tensor) or img.dim() != image_dims:
        raise ValueError(f"{prefix} {what} must be a {image_dims}-D tensor, got "
                         f"{tuple(img.shape) if isinstance(img, Tensor) else type(img).__name__}".strip())
    if img.is_floating_point():
        img = check_tensor(f"{prefix} {what}".strip(), img, ndim=image_dims)
    caps = _caption_inputs(f"{prefix} captions".strip(), triple[1])
    c2i = check_caption_to_image(f"{prefix} caption_to_image".strip(), triple[2], img.shape[0], len(caps))
    return img, caps, c2i


def token_inputs(train: tuple, val: tuple | None, min_count: int) -> tuple[Inputs, Inputs | None, Vocabulary | None,
                                                                         int]:
    """(train, val, vocabulary or None, vocabulary size) with captions as token ids.

    Texts are tokenised with the vocabulary of the training texts; given ids are used as they
    are (both splits must then be ids of one vocabulary, whose size is one more than the
    largest id).
    """
    texts = [isinstance(t[1], list) for t in (train, val) if t is not None]
    if len(set(texts)) > 1:
        raise TypeError("captions and val captions must both be texts or both be token ids (of one vocabulary)")
    vocab = None
    if texts[0]:
        vocab = Vocabulary.build(train[1], min_count=check_int("min_count", min_count, 1))
        train, val = ((t[0], vocab.encode(t[1]), t[2]) if t is not None else None for t in (train, val))
    size = len(vocab) if vocab is not None else 1 + max(int(t[1].max()) for t in (train, val) if t is not None)
    return train, val, vocab, max(size, 2)


def fit_vsepp(
    img_feats: Tensor,
    captions: Sequence[str] | Tensor,
    caption_to_image: Tensor,
    loss: str | LossFn | Objective = "unified",
    loss_kwargs: Mapping | None = None,
    *,
    val: tuple | None = None,
    head: str = "linear",
    dim: int = VSEPP_SIZES["dim"],
    text_encoder: str = "gru",
    word_dim: int = VSEPP_SIZES["word_dim"],
    hidden: int | None = None,
    min_count: int = 1,
    settings: TrainSettings | None = None,
    **overrides,
) -> FitResult:
    """Train an image head on frozen image features and a text encoder from scratch on the captions' words.

    Data: ``img_feats`` [n_images, D] (frozen, cached), ``captions`` -- the caption texts (a list
    of str, tokenised here with a vocabulary of the words seen at least ``min_count`` times;
    VSE++ uses 4 on Flickr30K) or their token ids [n_captions, L] (``caption_ids``), and
    ``caption_to_image`` [n_captions]; ``val`` the same triple for validation. Caption
    *features* (a float tensor) are an error: they have no words to learn from.

    Model: ``head`` ("linear", VSE++'s, or "mlp") into a ``dim``-d joint space; ``text_encoder``
    "gru" (VSE++) with ``word_dim``-d word embeddings and a ``hidden``-d GRU (None: 1024), or "bag"
    (mean of word embeddings; it has no hidden size). Defaults: VSE++'s sizes (:data:`VSEPP_SIZES`).

    Loss, training, history, checkpoints and callbacks as :func:`vlr_lib.train.fit` (default
    settings: ``TrainSettings()``). ``result.extras`` holds the vocabulary (None for ids) and
    the validation chance rsum.
    """
    train = caption_triple("", (img_feats, captions, caption_to_image))
    val_t = caption_triple("val", val) if val is not None else None
    if val_t is not None and val_t[0].shape[1] != train[0].shape[1]:
        raise ValueError(f"val img_feats has dimension {val_t[0].shape[1]} but the training img_feats have "
                         f"{train[0].shape[1]}")
    train, val_t, vocab, vocab_size = token_inputs(train, val_t, min_count)
    settings, objective = prepare(settings, overrides, train[0].shape[0], loss, loss_kwargs)
    dim = check_int("dim", dim, 1)
    if hidden is None and text_encoder == "gru":
        hidden = VSEPP_SIZES["hidden"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings.seed)
        models = (make_head(head, train[0].shape[1], dim),
                  make_text_encoder(text_encoder, vocab_size, dim, word_dim, hidden))
    config = {
        "mode": "vsepp",
        "loss": objective.name,
        "loss_kwargs": objective.kwargs,
        "head": head,
        "dim": dim,
        "text_encoder": text_encoder,
        "word_dim": word_dim,
        "hidden": hidden,
        "vocab_size": vocab_size,
        "data": data_fingerprint(*train),
        "val": data_fingerprint(*val_t) if val_t is not None else None,
    }
    return launch_with_text(models, train, val_t, objective, settings, config, vocab)


def launch_with_text(models, train: Inputs, val: Inputs | None, objective, settings: TrainSettings, config: dict,
                     vocab: Vocabulary | None) -> FitResult:
    """``launch``, then the extras of a run with a text encoder: its vocabulary and the validation chance rsum."""
    from ..metrics import chance_rsum

    result = launch(models, train, val, objective, settings, config)
    result.extras.update(vocab=vocab, chance_rsum=chance_rsum(val[2]) if val is not None else None)
    return result
