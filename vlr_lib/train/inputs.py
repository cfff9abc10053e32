"""What each training setting trains on, built from a shapes DatasetDict: the inputs of the three settings.

A *setting* says which parts of the retrieval model learn (Bleeker & de Rijke, Table 1 and
appendix B.3, train VSE++ "without backbone fine-tuning"):

- ``"features"`` -- two projection heads on frozen features: pretrained image features
  (``vlr_lib.shapes_encoder``) and frozen caption features (hashed bags of words,
  ``vlr_lib.features.hashed_bow``); ``fit``. The cheapest setting, the showdown's default.
- ``"vsepp"`` -- the VSE++ setting (Faghri et al.): a projection head on the same frozen image
  features and a GRU text encoder over the training captions' vocabulary, trained from scratch
  with the loss; ``fit_vsepp``.
- ``"e2e"`` -- end to end: a TinyCNN on the pixels and a GRU on the words, both from scratch;
  ``fit_end_to_end``.

Every setting's split is a triple (image inputs, caption inputs, caption_to_image): image
features or uint8 images, caption features or token ids [n_captions, L] (ids from the
vocabulary of the *training* captions, :func:`caption_ids`).
"""
from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from ..models import Vocabulary
from .fit_features import Triple

SETTINGS = ("features", "vsepp", "e2e")
#: What each setting trains, in words (tables and reports name their setting with it).
SETTING_LABELS = {
    "features": "heads on frozen features",
    "vsepp": "VSE++: frozen image features + GRU text encoder from scratch",
    "e2e": "end to end: CNN + GRU from scratch",
}
IMAGE_ENCODERS = ("pretrained", "random")


def check_setting(setting: object, name: str = "setting") -> str:
    """`setting` when it is one of :data:`SETTINGS`, else a ValueError naming `name`."""
    if setting not in SETTINGS:
        raise ValueError(f"{name} must be one of {SETTINGS}, got {setting!r}")
    return setting  # type: ignore[return-value]


def flat_captions(split) -> tuple[list[str], Tensor]:
    """Every caption of a split in the Flickr30K schema, image by image, and the image of each caption."""
    caps = split["caption"]
    c2i = torch.repeat_interleave(torch.arange(len(caps)), torch.tensor([len(c) for c in caps], dtype=torch.long))
    return [c for five in caps for c in five], c2i


def caption_ids(captions: Mapping[str, Sequence[str]], train: str = "train",
                min_count: int = 1) -> tuple[dict[str, Tensor], Vocabulary]:
    """Token ids [n_captions, L] of every split's captions, with the vocabulary of the `train` split's.

    Words of the other splits that the training captions lack become ``<unk>``, as in VSE++
    (which keeps the training words seen at least ``min_count`` times: 4 on Flickr30K).
    """
    if train not in captions:
        raise ValueError(f"captions has no {train!r} split to build the vocabulary from (it has {sorted(captions)})")
    vocab = Vocabulary.build(captions[train], min_count=min_count)
    return {name: vocab.encode(list(texts)) for name, texts in captions.items()}, vocab


def _image_encoder(image_encoder: str, image_size: int, width: int, seed: int):
    from .. import shapes_encoder as E

    if image_encoder not in IMAGE_ENCODERS:
        raise ValueError(f"image_encoder must be one of {IMAGE_ENCODERS}, got {image_encoder!r}")
    if image_encoder == "random":
        return _random_encoder(E.EncoderSettings(image_size=image_size, width=width, seed=seed))
    return E.load_or_train_encoder(settings=E.EncoderSettings(image_size=image_size, width=width), progress=False)


@functools.lru_cache(maxsize=4)
def _random_encoder(settings):
    """``shapes_encoder.random_encoder``, kept in memory: it is not cached on disk and takes seconds to build
    (its pool is rendered and standardised), and it never changes (frozen, eval mode, no gradients)."""
    from .. import shapes_encoder as E

    return E.random_encoder(settings)


@torch.no_grad()
def shapes_features(dataset_dict, seed: int = 0, width: int = 32, splits: Sequence[str] = ("train", "validation"),
                    image_encoder: str = "pretrained") -> dict[str, Triple]:
    """Frozen features of a shapes DatasetDict: {split: (img_feats, txt_feats, caption_to_image)}.

    Images: ``image_encoder="pretrained"`` (default) -- the frozen TinyCNN pretrained to read
    scenes on a disjoint pool (``vlr_lib.shapes_encoder``, docs/shapes_encoder.md): one fixed
    backbone, cached, the analogue of an ImageNet backbone; ``"random"`` -- the same network
    never trained (``shapes_encoder.random_encoder``), with the same export, so that comparing the
    two isolates what pretraining adds. `seed` seeds the random encoder's weights (0: exactly the
    weights pretraining starts from); the pretrained backbone does not depend on it. `width` is the
    encoder's width (another width is another encoder, pretrained and cached once).
    Captions: ``vlr_lib.features.hashed_bow`` (unigrams + bigrams, 2048 buckets), frozen.
    """
    from .. import shapes_encoder as E
    from ..features import hashed_bow

    splits = list(splits)
    if not splits:
        raise ValueError("splits is empty: name at least one split, e.g. ('train', 'validation')")
    missing = [s for s in splits if s not in dataset_dict]
    if missing:
        raise ValueError(f"splits {missing} are not in the dataset (it has {list(dataset_dict)})")
    size = dataset_dict[splits[0]][0]["image"].size[0]
    encoder = _image_encoder(image_encoder, size, width, seed)
    out = {}
    for name in splits:
        texts, c2i = flat_captions(dataset_dict[name])
        img = E.pretrained_image_features(dataset_dict[name], encoder=encoder, progress=False)
        out[name] = (img, hashed_bow(texts), c2i)
    return out


def shapes_inputs(dataset_dict, setting: str = "features", *, image_encoder: str = "pretrained",
                  splits: Sequence[str] = ("train", "validation", "test"),
                  min_count: int = 1) -> tuple[dict[str, Triple], Vocabulary | None]:
    """The inputs of `setting` for each split of a shapes DatasetDict, and the vocabulary (None for features).

    features: :func:`shapes_features`; vsepp: the same image features with token ids
    (:func:`caption_ids`, vocabulary of the first split's captions); e2e: uint8 images
    [N, 3, H, W] with token ids. `image_encoder` is for features and vsepp.
    """
    check_setting(setting)
    if image_encoder not in IMAGE_ENCODERS:
        raise ValueError(f"image_encoder must be one of {IMAGE_ENCODERS}, got {image_encoder!r}")
    splits = list(splits)
    if setting == "features":
        return shapes_features(dataset_dict, splits=splits, image_encoder=image_encoder), None
    captions = {name: flat_captions(dataset_dict[name]) for name in splits}
    ids, vocab = caption_ids({name: texts for name, (texts, _) in captions.items()}, splits[0], min_count)
    if setting == "vsepp":
        feats = shapes_features(dataset_dict, splits=splits, image_encoder=image_encoder)
        images = {name: feats[name][0] for name in splits}
    else:
        images = {name: shapes_images(dataset_dict[name]) for name in splits}
    return {name: (images[name], ids[name], captions[name][1]) for name in splits}, vocab


def shapes_images(split) -> Tensor:
    """The images of a split in the Flickr30K schema as one uint8 tensor [N, 3, H, W]."""
    return torch.from_numpy(np.stack([np.asarray(im.convert("RGB")) for im in split["image"]])).permute(0, 3, 1, 2) \
        .contiguous()


def with_caption_ids(dataset_dict, triples: Mapping[str, Triple], manifests: Mapping[str, Mapping], where: str,
                     min_count: int = 1) -> tuple[dict[str, Triple], Vocabulary]:
    """Cached feature triples with their caption features replaced by the dataset's captions as token ids.

    For the VSE++ setting on cached features (Flickr30K): `triples` hold the cached image
    features of each split (possibly only the first images), `manifests` the caches' manifests.
    Each split of `dataset_dict` (found at `where`, named in errors) must be the data the
    features were extracted from -- the same ``features.data_signature`` -- so that caption k is
    the one at row k of the cache. The vocabulary is the first split's (the training captions').
    """
    from ..features import captions_of, data_signature

    texts = {}
    for split, triple in triples.items():
        if data_signature(dataset_dict[split]) != manifests[split].get("data_signature"):
            raise ValueError(f"the {split} captions of the data at {where} are not those its cached features were "
                             "extracted from; extract the features of this copy again (data_scripts/extract_features.py)")
        texts[split] = captions_of(dataset_dict[split])[0][: triple[2].shape[0]]  # the images kept, in cache order
    ids, vocab = caption_ids(texts, train=next(iter(triples)), min_count=min_count)
    return {split: (t[0], ids[split], t[2]) for split, t in triples.items()}, vocab
