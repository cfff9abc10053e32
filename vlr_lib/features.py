"""Frozen-backbone features: encode every image and caption once, cache them on disk.

The workbook trains only small heads on top of frozen features, so every loss
is compared on identical inputs (the data modes of docs/architecture.md). Two backbones:

* "clip-vit-b32": open_clip ``ViT-B-32`` with the "openai" weights (QuickGELU,
  as those weights were trained; other open_clip tags get their own setting)
  and its BPE tokenizer; image and text features of dimension 512 from
  ``encode_image`` / ``encode_text``.
* "vsepp-resnet50": the VSE++ recipe (Faghri et al.) reduced to frozen parts:
  torchvision ResNet-50 (ImageNet weights "IMAGENET1K_V1"), the 2048-d
  average-pooled features before the classifier; captions as a *hashed bag of
  words* (unigrams and bigrams, feature hashing with a sign bit, blake2b hash,
  2048 buckets, L2-normalised). A linear head on that vector is a trainable
  word(-pair) embedding average, the text side of VSE0/VSE++ without the GRU;
  it needs no download. Bigrams keep "red circle" apart from "red square",
  which plain bags of words cannot do on the shapes data.

Features are stored raw (not normalised); `vlr_lib.similarity` normalises.

Cache layout (one directory per dataset x revision x split x backbone x weights x dtype,
``default_cache_dir``; Flickr30K's dataset id and revision -- a commit hash -- come from
``vlr_lib.data.flickr30k.resolve_source``, so a Hub download and a copy saved from the same
commit share one cache)::

    features.pt     torch.save({"img": [n_images, D], "txt": [n_captions, D],
                                "caption_to_image": int64 [n_captions]})
    manifest.json   the request (backbone, pretrained tag, text encoder, image size,
                    dataset id + revision + split, counts, dtype, a signature of the
                    captions and image ids) + D, content hash, versions

Both files are written atomically (temporary file in the same directory, fsync,
os.replace), the manifest last; the manifest's SHA-256 of the tensors is
checked on every load, so a crash between the two replaces, or a damaged file,
shows up as a corrupt cache. `load_or_build_features` rebuilds a cache that does
not match the request or is corrupt, never reuses it silently; with
``build=False`` it raises instead. `cached_feature_sets` / `choose_feature_set` find the
Flickr30K caches under a root and choose between several by revision, weights and dtype
(the ``--revision`` / ``--weights`` / ``--dtype`` flags), naming the flag when it is needed.

Extraction defaults follow the device (`loader_settings`): batches of 256 with
``min(8, CPUs)`` DataLoader workers and pinned memory on CUDA, batches of 64 in the main
process elsewhere (the CPU results are those of the earlier fixed defaults).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow.compute as pc
import torch
from torch import Tensor

from . import __version__, env
from ._checks import check_choice
from ._io import UnreadableFileError, atomic_write, atomic_write_text, read_back, read_json

BACKBONES = ("clip-vit-b32", "vsepp-resnet50")
FORMAT_VERSION = 1
FEATURES_FILE = "features.pt"
MANIFEST_FILE = "manifest.json"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
BOW_DIM = 2048
_DEFAULT_TAGS = {"clip-vit-b32": "openai", "vsepp-resnet50": "IMAGENET1K_V1"}
_NATIVE_SIZE = 224
# Fields of the manifest that a request must match exactly.
REQUEST_KEYS = ("format_version", "backbone", "pretrained", "init_seed", "text_encoder", "image_size",
                "dataset_id", "revision", "split", "n_images", "n_captions", "dtype", "data_signature")


class FeatureCacheError(RuntimeError):
    """A feature cache cannot be used as it is."""


class FeatureCacheMissingError(FeatureCacheError):
    """No cache at the given directory."""


class FeatureCacheStaleError(FeatureCacheError):
    """The cache was built for a different request (backbone, dataset, revision, split, counts, ...)."""


class FeatureCacheCorruptError(FeatureCacheError):
    """The cache's files do not agree with its manifest (hash mismatch, unreadable file)."""


@dataclass
class FeatureSet:
    """Cached features of one split: img [n_images, D], txt [n_captions, D], caption_to_image [n_captions]."""

    img: Tensor
    txt: Tensor
    caption_to_image: Tensor
    manifest: dict[str, Any]

    @property
    def dim(self) -> int:
        return int(self.img.shape[1])


# ---------------------------------------------------------------- encoders
def resolve_pretrained(backbone: str, pretrained: bool | str | None) -> str:
    """The weights tag recorded in the manifest: True -> the backbone's default, False/None -> "none"."""
    check_choice("backbone", backbone, BACKBONES)
    if pretrained is True:
        return _DEFAULT_TAGS[backbone]
    if pretrained is False or pretrained is None or pretrained == "none":
        return "none"
    if not isinstance(pretrained, str) or not pretrained:
        raise TypeError(f"pretrained must be a bool, None or a weights tag, got {pretrained!r}")
    return pretrained


def text_encoder_id(backbone: str) -> str:
    check_choice("backbone", backbone, BACKBONES)
    return "open_clip-ViT-B-32-text" if backbone == "clip-vit-b32" else f"hashed-bow-uni+bi-blake2b-{BOW_DIM}"


class Encoder:
    """A frozen image encoder and text encoder with their preprocessing."""

    backbone: str
    pretrained: str
    init_seed: int | None
    image_size: int
    dim: int
    device: torch.device
    transform: Callable[[Any], Tensor]

    def encode_images(self, pixels: Tensor) -> Tensor:
        raise NotImplementedError

    def encode_texts(self, texts: Sequence[str]) -> Tensor:
        return self.encode_tokens(self.tokenize(texts))

    def tokenize(self, texts: Sequence[str]) -> Any:
        """The text side's CPU work on a batch of captions (extraction runs it in the loader's workers)."""
        return list(texts)

    def encode_tokens(self, tokens: Any) -> Tensor:
        """Features of a batch that :meth:`tokenize` prepared. A subclass defines this and ``tokenize``, or
        ``encode_texts`` alone (then tokenising is the identity)."""
        return self.encode_texts(tokens)

    @property
    def text_encoder(self) -> str:
        return text_encoder_id(self.backbone)


class ClipEncoder(Encoder):
    """open_clip ViT-B-32: `encode_image`, `encode_text` (512-d)."""

    def __init__(self, pretrained: str, device: torch.device, image_size: int, seed: int):
        import open_clip  # optional dependency: only this backbone needs it

        weights = None if pretrained == "none" else pretrained
        # The activation the weights were trained with (QuickGELU for "openai"); random init uses
        # the "openai" configuration, so tests build exactly the model class and config users get.
        quick_gelu = bool(open_clip.get_pretrained_cfg("ViT-B-32", weights or "openai").get("quick_gelu", False))
        with torch.random.fork_rng(devices=[]):  # random init is reproducible and leaves global RNG alone
            torch.manual_seed(seed)
            model, _, self.transform = open_clip.create_model_and_transforms(
                "ViT-B-32", pretrained=weights, force_quick_gelu=quick_gelu,
                force_image_size=None if image_size == _NATIVE_SIZE else image_size,
            )
        self.model = model.to(device).eval().requires_grad_(False)
        self.tokenizer = open_clip.get_tokenizer("ViT-B-32")
        self.backbone, self.pretrained, self.device, self.image_size = "clip-vit-b32", pretrained, device, image_size
        self.init_seed = seed if pretrained == "none" else None
        self.dim = int(self.model.text_projection.shape[1])

    @torch.no_grad()
    def encode_images(self, pixels: Tensor) -> Tensor:
        return self.model.encode_image(pixels.to(self.device, non_blocking=True))

    def tokenize(self, texts: Sequence[str]) -> Tensor:
        return self.tokenizer(list(texts))  # BPE in Python: ~10,000 captions/s on one core

    @torch.no_grad()
    def encode_tokens(self, tokens: Tensor) -> Tensor:
        """The text features of a batch, its token rows cut after the batch's longest caption.

        The text transformer is causal and reads each caption's feature at its end token, so the padding after the
        longest caption reaches no feature: cutting it leaves the features as they were (up to float rounding) and
        saves most of the work (the context is 77 tokens; a Flickr30K caption is about 15)."""
        length = _useful_length(self.model, tokens)
        with _text_context(self.model, length):
            return self.model.encode_text(tokens[:, :length].to(self.device, non_blocking=True))


def _useful_length(model: Any, tokens: Tensor) -> int:
    """How many token positions can reach a text feature: up to the batch's longest caption where the model is
    causal and reads each feature at the end token ("argmax", "eos") or the first; else all of them."""
    causal = isinstance(getattr(model, "attn_mask", None), Tensor)
    if not causal or getattr(model, "text_pool_type", None) not in ("argmax", "eos", "first"):
        return tokens.shape[1]
    # the tokens come from the loader on the CPU (no device synchronisation); 0 is the padding token
    return max(1, int((tokens != 0).sum(dim=1).max())) if tokens.device.type == "cpu" else tokens.shape[1]


@contextlib.contextmanager
def _text_context(model: Any, length: int):
    """open_clip's CLIP with its text context (positions and causal mask) cut to `length` tokens inside the block."""
    positions, mask = model.positional_embedding, model.attn_mask
    if length >= positions.shape[0]:
        yield
        return
    model.positional_embedding = torch.nn.Parameter(positions[:length], requires_grad=False)
    model.attn_mask = mask[:length, :length]
    try:
        yield
    finally:
        model.positional_embedding, model.attn_mask = positions, mask


class ResNetBowEncoder(Encoder):
    """torchvision ResNet-50 pooled features (2048-d) + hashed bag of uni/bigrams (2048-d)."""

    def __init__(self, pretrained: str, device: torch.device, image_size: int, seed: int):
        import torchvision

        weights = None if pretrained == "none" else torchvision.models.ResNet50_Weights[pretrained]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = torchvision.models.resnet50(weights=weights)
        model.fc = torch.nn.Identity()  # keep the 2048-d average-pooled features
        self.model = model.to(device).eval().requires_grad_(False)
        # The ImageNet preset (resize 256/224 of the crop, crop, normalise); building it downloads nothing.
        preset = torchvision.models.ResNet50_Weights.IMAGENET1K_V1.transforms
        self.transform = preset(crop_size=image_size, resize_size=round(image_size * 256 / 224))
        self.backbone, self.pretrained, self.device, self.image_size = "vsepp-resnet50", pretrained, device, image_size
        self.init_seed = seed if pretrained == "none" else None
        self.dim = 2048

    @torch.no_grad()
    def encode_images(self, pixels: Tensor) -> Tensor:
        return self.model(pixels.to(self.device, non_blocking=True))

    def tokenize(self, texts: Sequence[str]) -> Tensor:
        return hashed_bow(texts, BOW_DIM)

    def encode_tokens(self, tokens: Tensor) -> Tensor:
        return tokens.to(self.device, non_blocking=True)


def build_encoder(
    backbone: str = "clip-vit-b32",
    pretrained: bool | str | None = True,
    device: str | torch.device = "cpu",
    image_size: int = _NATIVE_SIZE,
    seed: int = 0,
) -> Encoder:
    """A frozen encoder. pretrained=True downloads the default weights on first use (cached by
    open_clip / torchvision); False or None gives a randomly initialised model of the same class
    (seeded by `seed`), which needs no download (tests). image_size other than 224 is for fast tests."""
    tag = resolve_pretrained(backbone, pretrained)
    if isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 32:
        raise ValueError(f"image_size must be an int >= 32, got {image_size!r}")
    cls = ClipEncoder if backbone == "clip-vit-b32" else ResNetBowEncoder
    return cls(tag, torch.device(device), image_size, seed)


@functools.lru_cache(maxsize=1 << 18)
def _bucket(gram: str, dim: int) -> int:
    """Signed bucket of a word or word pair: +(b+1) or -(b+1), from a stable (unsalted) hash."""
    h = int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "little")
    return (h % dim + 1) * (1 if (h >> 63) & 1 else -1)


def hashed_bow(texts: Sequence[str], dim: int = BOW_DIM) -> Tensor:
    """Feature-hashed bag of lower-cased unigrams and bigrams (Weinberger et al. 2009), L2-normalised, [B, dim]."""
    rows, signed = [], []
    for i, text in enumerate(texts):  # tokenising strings is inherently per caption
        words = re.findall(r"[a-z0-9]+", text.lower())
        grams = words + [f"{a} {b}" for a, b in zip(words, words[1:])]
        signed.extend(_bucket(g, dim) for g in grams)
        rows.extend([i] * len(grams))
    signed_t = torch.tensor(signed, dtype=torch.long)
    out = torch.zeros(len(texts), dim)
    out.index_put_((torch.tensor(rows, dtype=torch.long), signed_t.abs() - 1), signed_t.sign().float(), accumulate=True)
    return out / out.norm(dim=1, keepdim=True).clamp_min(1e-12)


# ---------------------------------------------------------------- extraction
class _Images(torch.utils.data.Dataset):
    def __init__(self, ds: datasets.Dataset, transform: Callable[[Any], Tensor]):
        self.ds, self.transform = ds.select_columns(["image"]), transform

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, i: int) -> Tensor:
        return self.transform(self.ds[i]["image"].convert("RGB"))


class _Tokens(torch.utils.data.Dataset):
    """Batches of captions, tokenised by the encoder: item i is batch i (the loader's workers tokenise in parallel)."""

    def __init__(self, texts: Sequence[str], batch_size: int, tokenize: Callable[[Sequence[str]], Any]):
        self.texts, self.batch_size, self.tokenize = texts, batch_size, tokenize

    def __len__(self) -> int:
        return -(-len(self.texts) // self.batch_size)

    def __getitem__(self, i: int) -> Any:
        return self.tokenize(self.texts[i * self.batch_size : (i + 1) * self.batch_size])


def captions_of(ds: datasets.Dataset) -> tuple[list[str], Tensor]:
    """All captions, image by image, and the image index of each caption (text columns only)."""
    col = ds.with_format("arrow")["caption"]
    counts = torch.from_numpy(pc.list_value_length(col).fill_null(0).to_numpy().astype(np.int64))
    texts = pc.list_flatten(col).to_pylist()
    return texts, torch.repeat_interleave(torch.arange(len(ds)), counts)


def data_signature(ds: datasets.Dataset) -> str:
    """SHA-256 of the image ids and captions: two datasets with the same signature hold the same text.

    Reads those two columns alone (column access gathers only the named column, also through
    a ``select``'s index mapping): never the image bytes (~4 GB for Flickr30K).
    """
    arrow = ds.with_format("arrow")
    h = hashlib.sha256()
    for name in ("img_id", "caption"):
        h.update(json.dumps(arrow[name].to_pylist()).encode())
    return h.hexdigest()


def loader_settings(device: str | torch.device, batch_size: int | None = None,
                    num_workers: int | None = None) -> dict[str, Any]:
    """DataLoader settings of an extraction on `device`; None picks the device's default.

    CUDA: batches of 256 images, ``min(8, CPUs)`` workers decoding JPEGs in parallel and
    pinned memory (asynchronous copies to the GPU). Elsewhere: batches of 64, decoding in
    the main process (workers only compete with the encoder for the same cores).
    """
    cuda = torch.device(device).type == "cuda"
    batch_size = (256 if cuda else 64) if batch_size is None else batch_size
    num_workers = (min(8, os.cpu_count() or 1) if cuda else 0) if num_workers is None else num_workers
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise ValueError(f"num_workers must be an int >= 0, got {num_workers!r}")
    return {"batch_size": batch_size, "num_workers": num_workers, "pin_memory": cuda}


def extraction_loaders(ds: datasets.Dataset, encoder: Encoder, batch_size: int | None = None,
                       num_workers: int | None = None) -> tuple[torch.utils.data.DataLoader,
                                                                torch.utils.data.DataLoader, Tensor]:
    """The two loaders of an extraction -- decoded, transformed images; tokenised captions, one batch per item --
    and each caption's image index. Tokenising is Python (open_clip's BPE, ~10,000 captions/s a core): on CUDA the
    loader's workers do it, batch by batch. `batch_size` / `num_workers`: :func:`loader_settings`."""
    loading = loader_settings(encoder.device, batch_size, num_workers)
    images = torch.utils.data.DataLoader(_Images(ds, encoder.transform), **loading)
    texts, caption_to_image = captions_of(ds)
    tokens = torch.utils.data.DataLoader(_Tokens(texts, loading["batch_size"], encoder.tokenize),
                                         **{**loading, "batch_size": None})
    return images, tokens, caption_to_image


def extract_features(
    ds: datasets.Dataset,
    encoder: Encoder,
    batch_size: int | None = None,
    dtype: torch.dtype = torch.float32,
    num_workers: int | None = None,
    progress: bool = True,
) -> tuple[Tensor, Tensor, Tensor]:
    """Encode every image and caption of `ds` once: (img [n, D], txt [n_captions, D], caption_to_image).

    `batch_size` / `num_workers` None: the defaults of the encoder's device (:func:`loader_settings`).
    """
    from tqdm.auto import tqdm

    images, tokens, caption_to_image = extraction_loaders(ds, encoder, batch_size, num_workers)
    # Features stay on the device until the end: a copy to the host per batch would make the host wait for
    # each batch's encoding before it could hand the next one over (docs/benchmarks.md, extraction profile).
    img = [encoder.encode_images(x).to(dtype) for x in tqdm(images, desc="images", disable=not progress)]
    txt = [encoder.encode_tokens(t).to(dtype) for t in tqdm(tokens, desc="captions", disable=not progress)]
    empty = torch.zeros(0, encoder.dim, dtype=dtype)
    return (torch.cat(img).cpu() if img else empty, torch.cat(txt).cpu() if txt else empty, caption_to_image)


# ---------------------------------------------------------------- the cache
def content_hash(tensors: dict[str, Tensor]) -> str:
    """SHA-256 over name, dtype, shape and bytes of each tensor (sorted by name)."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def make_request(
    ds: datasets.Dataset,
    *,
    backbone: str,
    pretrained: bool | str | None,
    dataset_id: str,
    revision: str,
    split: str,
    dtype: str = "float32",
    image_size: int = _NATIVE_SIZE,
    seed: int = 0,
) -> dict[str, Any]:
    """What a cache must have been built for (the fields of REQUEST_KEYS)."""
    tag = resolve_pretrained(backbone, pretrained)
    check_choice("dtype", dtype, tuple(DTYPES))
    n_captions = int(pc.sum(pc.list_value_length(ds.with_format("arrow")["caption"])).as_py() or 0)
    return {
        "format_version": FORMAT_VERSION, "backbone": backbone, "pretrained": tag,
        "init_seed": seed if tag == "none" else None, "text_encoder": text_encoder_id(backbone),
        "image_size": image_size, "dataset_id": str(dataset_id), "revision": str(revision), "split": str(split),
        "n_images": len(ds), "n_captions": n_captions, "dtype": dtype, "data_signature": data_signature(ds),
    }


def save_features(cache_dir: str | os.PathLike, features: FeatureSet) -> Path:
    """Write features.pt then manifest.json atomically; the manifest gets the content hash and D."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tensors = {"img": features.img, "txt": features.txt, "caption_to_image": features.caption_to_image}
    manifest = dict(features.manifest, dim=features.dim, content_hash=content_hash(tensors), files=[FEATURES_FILE],
                    vlr_lib_version=__version__, torch_version=torch.__version__)
    atomic_write(cache_dir / FEATURES_FILE, lambda f: torch.save(tensors, f))
    atomic_write_text(cache_dir / MANIFEST_FILE, json.dumps(manifest, indent=2, sort_keys=True))
    features.manifest = manifest
    return cache_dir


def read_manifest(cache_dir: str | os.PathLike) -> dict[str, Any]:
    """The manifest of the cache at `cache_dir`; FeatureCacheMissingError / FeatureCacheCorruptError name the file.

    A manifest that cannot be read for lack of permission raises PermissionError (not damage: no rebuild).
    """
    cache_dir = Path(cache_dir)
    if not (cache_dir / MANIFEST_FILE).exists() or not (cache_dir / FEATURES_FILE).exists():
        raise FeatureCacheMissingError(
            f"no feature cache at {str(cache_dir)!r} (need {MANIFEST_FILE} and {FEATURES_FILE}); build it with "
            "load_or_build_features(..., build=True) or `python data_scripts/extract_features.py`"
        )
    try:
        return read_json(cache_dir / MANIFEST_FILE, "feature-cache manifest", _rebuild_fix(cache_dir))
    except UnreadableFileError as err:
        raise FeatureCacheCorruptError(str(err)) from err


def _rebuild_fix(cache_dir: Path) -> str:
    return (f"delete the folder {str(cache_dir)!r} (or run data_scripts/extract_features.py with --rebuild) "
            "to build it again")


def load_features(
    cache_dir: str | os.PathLike, request: dict[str, Any] | None = None, verify: bool = True
) -> FeatureSet:
    """Load a cache; with `request`, every REQUEST_KEYS field must match; with `verify`, the content hash too."""
    cache_dir = Path(cache_dir)
    manifest = read_manifest(cache_dir)
    if request is not None:
        diff = {k: (manifest.get(k), request.get(k)) for k in REQUEST_KEYS if manifest.get(k) != request.get(k)}
        if diff:
            detail = "; ".join(f"{k}: cached {a!r} != requested {b!r}" for k, (a, b) in diff.items())
            raise FeatureCacheStaleError(f"feature cache at {str(cache_dir)!r} does not match the request: {detail}")

    def load(path: Path) -> dict:
        tensors = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(tensors, dict) or not {"img", "txt", "caption_to_image"} <= set(tensors):
            raise TypeError("not a features file written by vlr_lib.features")
        return tensors

    try:
        tensors = read_back(cache_dir / FEATURES_FILE, load, "feature cache", _rebuild_fix(cache_dir))
    except UnreadableFileError as err:
        raise FeatureCacheCorruptError(str(err)) from err
    fs = FeatureSet(tensors["img"], tensors["txt"], tensors["caption_to_image"], manifest)
    if verify and content_hash(tensors) != manifest.get("content_hash"):
        raise FeatureCacheCorruptError(
            f"feature cache at {str(cache_dir)!r} is corrupt: the content hash of {FEATURES_FILE} does not match "
            f"{MANIFEST_FILE} (interrupted write or damaged file); {_rebuild_fix(cache_dir)}"
        )
    return fs


def load_or_build_features(
    ds: datasets.Dataset,
    cache_dir: str | os.PathLike,
    *,
    dataset_id: str,
    split: str,
    revision: str = "",
    backbone: str = "clip-vit-b32",
    pretrained: bool | str | None = True,
    device: str | torch.device = "cpu",
    batch_size: int | None = None,
    dtype: str = "float32",
    image_size: int = _NATIVE_SIZE,
    seed: int = 0,
    num_workers: int | None = None,
    build: bool = True,
    rebuild: bool = False,
    encoder: Encoder | None = None,
    progress: bool = True,
) -> FeatureSet:
    """Features of split `ds` from the cache at `cache_dir`, building (or rebuilding) them when needed.

    A cache built for another request (backbone, weights, dataset id/revision/split,
    counts, dtype, captions) or failing its hash check is rebuilt with a warning;
    with build=False it raises FeatureCacheMissingError / FeatureCacheStaleError /
    FeatureCacheCorruptError instead. `encoder` reuses an encoder built by
    `build_encoder` (it must match backbone, pretrained, image_size and seed).
    `batch_size` / `num_workers` None: the device's defaults (:func:`loader_settings`).
    """
    request = make_request(ds, backbone=backbone, pretrained=pretrained, dataset_id=dataset_id, revision=revision,
                           split=split, dtype=dtype, image_size=image_size, seed=seed)
    if encoder is not None:
        got = (encoder.backbone, encoder.pretrained, encoder.image_size, encoder.init_seed)
        want = (backbone, request["pretrained"], image_size, request["init_seed"])
        if got != want:
            raise ValueError(f"encoder is {got} (backbone, pretrained, image_size, seed), the request needs {want}")
    if not rebuild:
        try:
            return load_features(cache_dir, request)
        except FeatureCacheError as err:
            if not build:
                raise
            if not isinstance(err, FeatureCacheMissingError):
                warnings.warn(f"rebuilding the feature cache: {err}", RuntimeWarning, stacklevel=2)
    encoder = encoder or build_encoder(backbone, pretrained, device, image_size, seed)
    img, txt, c2i = extract_features(ds, encoder, batch_size, DTYPES[dtype], num_workers, progress)
    fs = FeatureSet(img, txt, c2i, dict(request))
    save_features(cache_dir, fs)
    return fs


def default_cache_dir(root: str | os.PathLike, dataset_id: str, revision: str, split: str, backbone: str,
                      pretrained: bool | str | None = True, dtype: str = "float32") -> Path:
    """root/<dataset>-<revision>-<split>-<backbone>-<weights>-<dtype>, with unsafe characters replaced.

    Every field of the cache key is in the name, so caches of two revisions, weights or dtypes
    live side by side and none is taken for a stale version of another.
    """
    check_choice("dtype", dtype, tuple(DTYPES))
    parts = [dataset_id, revision or "norev", split, backbone, resolve_pretrained(backbone, pretrained), dtype]
    return Path(root) / "-".join(re.sub(r"[^A-Za-z0-9_.=]+", "_", p) for p in parts)


def flickr_cache_id(
    data_path: str | os.PathLike | None = None, *, repo_id: str | None = None, revision: str | None = None
) -> tuple[str, str]:
    """(dataset_id, revision) that Flickr30K feature caches are recorded and found under.

    The one convention of ``data_scripts/extract_features.py --data flickr30k`` (which writes
    the caches), ``python -m vlr_lib train|grid|check --data flickr30k``, the showdown and the
    notebooks (which read them): the identity of ``vlr_lib.data.flickr30k.resolve_source`` --
    the Hub repo id and the *commit* its revision resolves to, also for a copy saved by
    prepare_flickr30k from the Hub (it records both), else ``("flickr30k:<folder name>",
    revision or "")`` for a local copy of unknown origin. The pair goes into the manifest
    and, through ``default_cache_dir``, into the folder name.
    """
    from .data.flickr30k import resolve_source

    source = resolve_source(data_path, repo_id=repo_id, revision=revision)
    return source.dataset_id, source.revision


FLICKR_SPLITS = ("train", "validation", "test")
#: The flag (and notebook variable) that chooses between cached feature sets differing in a field.
CHOICE_FLAGS = {"dataset_id": "--data-path (VLR_DATA_PATH in notebooks)",
                "revision": "--revision (VLR_FLICKR_REVISION in notebooks)",
                "pretrained": "--weights", "dtype": "--dtype"}


class FeatureSetChoiceError(FeatureCacheError, ValueError):
    """Several cached feature sets match a request; the message lists them and names the flag that chooses."""


@dataclass(frozen=True)
class CachedSet:
    """One Flickr30K feature set under a cache root: its identity and the cache folder of each split it has."""

    dataset_id: str
    revision: str
    backbone: str
    pretrained: str
    dtype: str
    dirs: dict[str, Path]

    def describe(self) -> str:
        at = self.revision[:12] or "-"
        return (f"{self.dataset_id}@{at} {self.backbone} weights={self.pretrained} dtype={self.dtype} "
                f"({', '.join(s for s in FLICKR_SPLITS if s in self.dirs)})")


def _is_flickr_id(dataset_id: str) -> bool:
    """A dataset id of :func:`flickr_cache_id`: a local copy ("flickr30k:<folder>") or the Hub repo."""
    from .data.flickr30k import DEFAULT_REPO_ID, ENV_REPO

    return "flickr30k" in dataset_id.lower() or dataset_id == (env.text(ENV_REPO) or DEFAULT_REPO_ID)


def cached_feature_sets(cache_root: str | os.PathLike, backbone: str | None = None) -> list[CachedSet]:
    """Every Flickr30K feature set under `cache_root` (of `backbone`, or all), read from the manifests.

    The layout of :func:`default_cache_dir` (written by ``data_scripts/extract_features.py``
    and the command lines); a set is one (dataset id, revision, backbone, weights, dtype).
    """
    root = Path(cache_root)
    found: dict[tuple, dict[str, Path]] = {}
    for manifest in sorted(root.glob("*/manifest.json")) if root.is_dir() else []:
        m = read_manifest(manifest.parent)
        if (backbone is None or m.get("backbone") == backbone) and _is_flickr_id(str(m.get("dataset_id", ""))):
            key = (m["dataset_id"], m.get("revision", ""), m.get("backbone"), m.get("pretrained"), m.get("dtype"))
            found.setdefault(key, {})[m["split"]] = manifest.parent
    return [CachedSet(*key, dirs) for key, dirs in found.items()]


def choose_feature_set(
    sets: Sequence[CachedSet],
    *,
    splits: Sequence[str] = FLICKR_SPLITS,
    dataset_id: str | None = None,
    revision: str | None = None,
    weights: bool | str | None = None,
    dtype: str | None = None,
) -> CachedSet | None:
    """The one set of `sets` that has `splits` and matches every criterion given; None when none does.

    `revision` matches a commit hash by prefix (a short hash works); `weights` None means the
    backbone's default weights ("openai", "IMAGENET1K_V1"): random-weight caches are used only
    when asked for. Several matches raise :class:`FeatureSetChoiceError`, which lists them and
    names the flag that tells them apart.
    """
    def fits(s: CachedSet) -> bool:
        tag = resolve_pretrained(s.backbone, True if weights is None else weights)
        return (set(splits) <= set(s.dirs) and (dataset_id is None or s.dataset_id == dataset_id)
                and (revision is None or s.revision.startswith(revision)) and s.pretrained == tag
                and (dtype is None or s.dtype == dtype))

    matches = [s for s in sets if fits(s)]
    if len(matches) > 1:
        flags = [CHOICE_FLAGS[f] for f in CHOICE_FLAGS if len({getattr(s, f) for s in matches}) > 1]
        raise FeatureSetChoiceError(
            f"the cache holds several Flickr30K feature sets that fit: {'; '.join(s.describe() for s in matches)}. "
            f"Choose one with {' and '.join(flags)}")
    return matches[0] if matches else None


def _rev_flag(revision: str) -> str:
    """The value of --revision that selects `revision` (12 characters of a commit hash identify it)."""
    return revision[:12] or "''"


def other_sets_message(sets: Sequence[CachedSet], splits: Sequence[str] = FLICKR_SPLITS) -> str:
    """For a request that no set fits: the sets that have `splits` but differ, each with the flags that select it."""
    usable = [s for s in sets if set(splits) <= set(s.dirs)]
    if not usable:
        return ""
    hints = [f"{s.describe()} [--revision {_rev_flag(s.revision)} --weights {s.pretrained} --dtype {s.dtype}]"
             for s in usable]
    return "; found other feature sets (a flag chooses one, nothing is reused silently): " + "; ".join(hints)


def flickr_feature_dirs(
    cache_root: str | os.PathLike,
    backbone: str = "clip-vit-b32",
    *,
    revision: str | None = None,
    weights: bool | str | None = None,
    dtype: str | None = None,
    splits: Sequence[str] = FLICKR_SPLITS,
) -> dict[str, Path]:
    """The cache folders of the one Flickr30K feature set under `cache_root` with every split of `splits`.

    Chosen by :func:`choose_feature_set` (default weights unless `weights` says otherwise; any
    revision and dtype unless given). Raises FileNotFoundError, saying what to run and which
    other sets exist with the flags that select them, when no set fits, and
    FeatureSetChoiceError (a ValueError) naming the flag when several do.
    """
    root = Path(cache_root)
    sets = cached_feature_sets(root, backbone)
    chosen = choose_feature_set(sets, splits=splits, revision=revision, weights=weights, dtype=dtype)
    if chosen is not None:
        return {split: chosen.dirs[split] for split in splits}
    asked = ", ".join(f"{k} {v}" for k, v in (("revision", revision), ("weights", weights), ("dtype", dtype)) if v)
    raise FileNotFoundError(
        f"Flickr30K mode (VLR_DATA=flickr30k, --data flickr30k) needs cached {backbone} features of the Flickr30K "
        f"Karpathy split ({', '.join(splits)}{'; ' + asked if asked else ''}) under {root}"
        f"{other_sets_message(sets, splits) or ', found none'}. Building them needs the data (network once) and "
        "preferably a GPU. Run from the repository root:\n"
        "  python data_scripts/prepare_flickr30k.py\n"
        f"  python data_scripts/extract_features.py --data flickr30k --backbone {backbone}\n"
        "then re-run the notebook, or `python -m vlr_lib showdown --data flickr30k` "
        "(`python -m vlr_lib check --data flickr30k` checks everything first)."
    )


@dataclass(frozen=True)
class CacheRequest:
    """The caches a Flickr30K request reads or builds: one folder per split, and the splits not cached yet."""

    backbone: str
    pretrained: str
    dtype: str
    dirs: dict[str, Path]
    missing: tuple[str, ...]


def flickr30k_cache_request(
    source: Any,
    cache_root: str | os.PathLike,
    *,
    splits: Sequence[str] = ("train", "validation"),
    backbone: str = "clip-vit-b32",
    weights: bool | str | None = None,
    dtype: str | None = None,
) -> CacheRequest:
    """Where the caches of the Flickr30K `source` (``vlr_lib.data.flickr30k.resolve_source``) are, and which are missing.

    The key: the source's dataset id and commit, the split, `backbone`, `weights` and `dtype`.
    None for `weights` / `dtype` means the defaults (the backbone's weights, float32) -- but when
    splits are missing and the cache holds this data complete in other variants (another dtype
    or weights, or another commit of the Hub branch asked for), FeatureSetChoiceError lists them
    with the flags that select them, or that build the default explicitly: nothing is encoded
    again, or used instead, silently.
    """
    from .data.flickr30k import _COMMIT

    tag, kind = resolve_pretrained(backbone, True if weights is None else weights), dtype or "float32"
    dirs = {split: default_cache_dir(cache_root, source.dataset_id, source.revision, split, backbone, tag, kind)
            for split in splits}
    missing = tuple(split for split in splits if not (dirs[split] / MANIFEST_FILE).is_file())
    if missing:
        pinned = source.path is not None or bool(_COMMIT.fullmatch(source.requested or ""))
        others = [s for s in cached_feature_sets(cache_root, backbone) if s.dataset_id == source.dataset_id
                  and (s.revision, s.pretrained, s.dtype) != (source.revision, tag, kind)
                  and (s.revision == source.revision or not pinned) and (s.pretrained == tag or weights is None)
                  and (s.dtype == kind or dtype is None)]
        if other_sets_message(others, splits):
            raise FeatureSetChoiceError(
                f"no cached {backbone} features of {source.describe()} with weights={tag}, dtype={kind} under "
                f"{cache_root}{other_sets_message(others, splits)}. To build the requested set instead, give its "
                f"flags explicitly (--revision {_rev_flag(source.revision)} --weights {tag} --dtype {kind})")
    return CacheRequest(backbone, tag, kind, dirs, missing)


def flickr30k_features(
    source: Any,
    cache_root: str | os.PathLike,
    *,
    device: str | torch.device = "cpu",
    build: bool = True,
    progress: bool = True,
    dataset: datasets.DatasetDict | None = None,
    **choice: Any,
) -> dict[str, FeatureSet]:
    """Features of the Flickr30K `source` per split: the caches of :func:`flickr30k_cache_request`, built when missing.

    `choice`: the keywords of :func:`flickr30k_cache_request` (``splits``, ``backbone``, ``weights``,
    ``dtype``), which say which feature set is read. Each cache is loaded with its captions checked
    against the data, or, with `build`, built on `device` (``load_or_build_features``). `dataset`:
    the loaded DatasetDict of `source` (loaded here when None).
    """
    from .data.flickr30k import load_flickr30k

    request = flickr30k_cache_request(source, cache_root, **choice)
    data = dataset if dataset is not None else load_flickr30k(source)
    return {split: load_or_build_features(
        data[split], folder, dataset_id=source.dataset_id, revision=source.revision, split=split,
        backbone=request.backbone, pretrained=request.pretrained, dtype=request.dtype, device=device,
        progress=progress, build=build) for split, folder in request.dirs.items()}
