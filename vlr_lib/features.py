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

Cache layout (one directory per backbone x dataset x split)::

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
``build=False`` it raises instead.
"""
from __future__ import annotations

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

from . import __version__
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
        raise NotImplementedError

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
        return self.model.encode_image(pixels.to(self.device))

    @torch.no_grad()
    def encode_texts(self, texts: Sequence[str]) -> Tensor:
        return self.model.encode_text(self.tokenizer(list(texts)).to(self.device))


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
        return self.model(pixels.to(self.device))

    @torch.no_grad()
    def encode_texts(self, texts: Sequence[str]) -> Tensor:
        return hashed_bow(texts, BOW_DIM).to(self.device)


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


def captions_of(ds: datasets.Dataset) -> tuple[list[str], Tensor]:
    """All captions, image by image, and the image index of each caption (text columns only)."""
    col = ds.with_format("arrow")["caption"]
    counts = torch.from_numpy(pc.list_value_length(col).fill_null(0).to_numpy().astype(np.int64))
    texts = pc.list_flatten(col).to_pylist()
    return texts, torch.repeat_interleave(torch.arange(len(ds)), counts)


def data_signature(ds: datasets.Dataset) -> str:
    """SHA-256 of the image ids and captions: two datasets with the same signature hold the same text."""
    table = ds.with_format("arrow")[:]
    h = hashlib.sha256()
    for name in ("img_id", "caption"):
        h.update(json.dumps(table.column(name).to_pylist()).encode())
    return h.hexdigest()


def extract_features(
    ds: datasets.Dataset,
    encoder: Encoder,
    batch_size: int = 64,
    dtype: torch.dtype = torch.float32,
    num_workers: int = 0,
    progress: bool = True,
) -> tuple[Tensor, Tensor, Tensor]:
    """Encode every image and caption of `ds` once: (img [n, D], txt [n_captions, D], caption_to_image)."""
    from tqdm.auto import tqdm

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    loader = torch.utils.data.DataLoader(_Images(ds, encoder.transform), batch_size=batch_size, num_workers=num_workers)
    img = [encoder.encode_images(x).to("cpu", dtype) for x in tqdm(loader, desc="images", disable=not progress)]
    texts, caption_to_image = captions_of(ds)
    starts = range(0, len(texts), batch_size)
    txt = [encoder.encode_texts(texts[s : s + batch_size]).to("cpu", dtype)
           for s in tqdm(starts, desc="captions", disable=not progress)]
    empty = torch.zeros(0, encoder.dim, dtype=dtype)
    return torch.cat(img) if img else empty, torch.cat(txt) if txt else empty, caption_to_image


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
    batch_size: int = 64,
    dtype: str = "float32",
    image_size: int = _NATIVE_SIZE,
    seed: int = 0,
    num_workers: int = 0,
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
                      pretrained: bool | str | None = True) -> Path:
    """root/<dataset>-<revision>-<split>-<backbone>-<weights>, with unsafe characters replaced."""
    parts = [dataset_id, revision or "norev", split, backbone, resolve_pretrained(backbone, pretrained)]
    return Path(root) / "-".join(re.sub(r"[^A-Za-z0-9_.=]+", "_", p) for p in parts)


def flickr_cache_id(
    data_path: str | os.PathLike | None = None, *, repo_id: str | None = None, revision: str | None = None
) -> tuple[str, str]:
    """(dataset_id, revision) that Flickr30K feature caches are recorded and found under.

    The one convention of ``data_scripts/extract_features.py --data flickr30k``
    (which writes the caches), ``vlr-train`` / ``vlr-grid --data flickr30k`` and
    the showdown (which read them); the pair goes into the manifest and, through
    ``default_cache_dir``, into the folder name. A local copy at `data_path` is
    ``("flickr30k:<its folder name>", revision or "")``; the Hub is ``(repo id,
    revision)`` with the defaults of ``vlr_lib.data.flickr30k.load_flickr30k``
    (env VLR_FLICKR_REPO / VLR_FLICKR_REVISION, then DEFAULT_REPO_ID /
    DEFAULT_REVISION), so the id names exactly what was downloaded.
    """
    if data_path is not None:
        return f"flickr30k:{Path(data_path).resolve().name}", revision or ""
    from .data.flickr30k import DEFAULT_REPO_ID, DEFAULT_REVISION, ENV_REPO, ENV_REVISION

    repo = repo_id or os.environ.get(ENV_REPO) or DEFAULT_REPO_ID
    return repo, revision or os.environ.get(ENV_REVISION) or DEFAULT_REVISION


def _is_flickr_id(dataset_id: str) -> bool:
    """A dataset id of :func:`flickr_cache_id`: a local copy ("flickr30k:<folder>") or the Hub repo."""
    return "flickr30k" in dataset_id.lower() or dataset_id == flickr_cache_id()[0]


def flickr_feature_dirs(cache_root: str | os.PathLike, backbone: str = "clip-vit-b32") -> dict[str, Path]:
    """The cached feature folders of one Flickr30K feature set with train, validation and test for `backbone`.

    Looks at every ``*/manifest.json`` under `cache_root` (the layout of
    ``vlr_lib.features.default_cache_dir``, written by
    ``data_scripts/extract_features.py``) whose dataset id follows
    ``vlr_lib.features.flickr_cache_id``; a feature set is one (dataset id,
    revision, weights). Raises FileNotFoundError, saying what to run, when no set
    has all three splits cached, and ValueError when several have.
    """
    root = Path(cache_root)
    found: dict[tuple, dict[str, Path]] = {}
    for manifest in sorted(root.glob("*/manifest.json")) if root.is_dir() else []:
        m = read_manifest(manifest.parent)
        if m.get("backbone") == backbone and _is_flickr_id(str(m.get("dataset_id", ""))):
            which = (m["dataset_id"], m.get("revision", ""), m.get("pretrained"))
            found.setdefault(which, {})[m["split"]] = manifest.parent
    complete = {k: v for k, v in found.items() if {"train", "validation", "test"} <= set(v)}
    if not complete:
        raise FileNotFoundError(
            f"Flickr30K mode (VLR_DATA=flickr30k, --data flickr30k) needs cached {backbone} features of the Flickr30K Karpathy split "
            f"(train, validation and test) under {root}, found {sorted(found) or 'none'}. This needs network "
            "once and preferably a GPU. Run from the repository root:\n"
            "  python data_scripts/prepare_flickr30k.py --out data/flickr30k\n"
            f"  python data_scripts/extract_features.py --data flickr30k --data-path data/flickr30k "
            f"--backbone {backbone} --device cuda\n"
            "then re-run the notebook, or `python -m vlr_lib showdown --data flickr30k --device cuda`."
        )
    if len(complete) > 1:
        raise ValueError(f"cache_root {root} holds several Flickr30K feature sets {sorted(complete)} "
                         "(dataset id, revision, weights); point cache_root at a folder with one of them")
    return next(iter(complete.values()))
