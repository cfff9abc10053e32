"""A pretrained, frozen image encoder for the shapes data: ``TinyCNN`` taught to read scenes, cached on disk.

The losses' lessons (VSE++, Faghri et al.; Bleeker & de Rijke, Table 1) are measured on
*pretrained* frozen image features (an ImageNet ResNet, frozen for the whole run in Bleeker &
de Rijke, appendix B.3). The cosine of a randomly initialised
CNN's features barely tracks what two shapes scenes share, so this module gives the shapes
mode the analogue of ImageNet pretraining:

1. **Pool.** ``pool_size + held_out`` scenes drawn with `vlr_lib.data.shapes.sample_scenes`
   at difficulty 0 (independent scenes) from ``SeedSequence(seed, spawn_key=(POOL_BRANCH,))``,
   a branch that no split of `make_shapes` uses (its splits are ``SeedSequence(seed).spawn(3)``,
   spawn keys 0, 1, 2). Every scene's marginal distribution is the same at any difficulty,
   so the pool looks like every split without containing any of their images.
2. **Task.** Read the scene, without captions or retrieval pairs: the number of objects
   (3 classes) and, for each cell of the 3 x 3 grid, whether it is occupied and the colour,
   shape and size of its object (the last three scored on occupied cells only). One linear
   classifier, shared by the nine cells, reads the convolutional map average-pooled to 3 x 3
   (a detector's head); the count is read from the pooled features. Adam with a one-cycle
   learning rate, single-threaded inside ``torch.random.fork_rng``, so one machine always
   produces the same bytes (the number of threads changes float sums).
3. **Export.** The frozen backbone's ``TinyCNN.pooled`` features [N, 12 * width], standardised
   with the statistics of the pool (part of the encoder, like ImageNet's mean and std: a
   split's features depend on its images only, not on which other split was passed), then
   each of the three pooled blocks (average, max, 2 x 2 map) weighted so that it carries the
   same share of the squared norm; unweighted, the 2 x 2 map (4x more dimensions) would carry
   two thirds of every cosine.

Shipped: the encoder of the default recipe (``EncoderSettings()``) ships with the package, in
``vlr_lib/assets/shapes_encoder/`` (``encoder.pt`` and ``manifest.json``: its sha256, the recipe,
the kernels and machine it was trained on, the held-out accuracy it reached). How well the recipe
trains swings with the CPU's arithmetic (held-out shape accuracy 0.80 under torch's portable
kernels, 0.68 under AVX2 on one machine: docs/shapes_encoder.md), so every machine loads these
weights instead of training its own, and every machine computes the same features up to inference
rounding. ``load_or_train_encoder()`` with the default recipe returns :func:`shipped_encoder` and
never trains; a missing, damaged or other file is an :class:`EncoderFileError` naming the file and
how to restore it. The manifest is checked like a record's: every field it needs, by name and type
(:func:`manifest_problem`), and its ``manifest_sha256`` over all its other fields (:func:`manifest_hash`;
a manifest without one is damaged), so an edited accuracy or date is refused, never shown; a FIFO or
other non-regular file in either file's place is refused before it is opened (``_io.read_regular``).
:func:`write_manifest` seals a manifest. ``python -m vlr_lib encoder --retrain`` re-trains it on purpose.

Cache (other recipes, e.g. the tests' tiny ones): one folder per request (``encoder_dir``, under ``default_cache_dir()``) with
``encoder.pt`` (the ``ShapesEncoder`` state_dict, loadable with ``weights_only=True``) and
``manifest.json`` (the request -- format version, pool seed and sizes, image size, width,
epochs, batch size, lr, torch version -- plus the content hash, the feature size, the
held-out pretraining accuracy per attribute and the library version). Both are written
atomically (weights first, manifest last) and hold no timestamps, so two processes that
build the same request at once write identical files. A cache that does not match the
request, or fails its hash, or cannot be parsed, or is not a regular file (a FIFO), is rebuilt
with a warning; a permission error is raised as such.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import __version__
from ._checks import check_int, check_positive
from ._io import NotRegularFileError, atomic_write, foreign_objects, read_regular
from .data.shapes import COLORS, GRID, MAX_OBJECTS, SHAPES, SIZES, Scenes, render, sample_scenes
from .features import content_hash
from .models import TinyCNN
from .paths import cache_root

__all__ = [
    "ATTRIBUTES",
    "EncoderFileError",
    "EncoderSettings",
    "SHIPPED_DIR",
    "ShapesEncoder",
    "block_weights",
    "default_cache_dir",
    "encoder_dir",
    "load_or_train_encoder",
    "manifest_hash",
    "manifest_problem",
    "pool_scenes",
    "pretrain",
    "pretrained_image_features",
    "random_encoder",
    "scene_labels",
    "shipped_encoder",
    "shipped_sha256",
    "write_encoder",
    "write_manifest",
    "task_accuracy",
]

FORMAT_VERSION = 1  # bump whenever the pool, the task, the training or the export changes
POOL_BRANCH = 0x504F4F4C  # "POOL": the pool's SeedSequence spawn key, unused by make_shapes' splits
WEIGHTS_FILE = "encoder.pt"
MANIFEST_FILE = "manifest.json"
#: The shipped manifest's sha256 of its own content (every other field): an edited accuracy or date shows.
MANIFEST_HASH = "manifest_sha256"
SHIPPED_DIR = Path(__file__).resolve().parent / "assets" / "shapes_encoder"
RESTORE = ("restore it with `git checkout -- vlr_lib/assets/shapes_encoder` (or reinstall vlr-workbook), "
           "or re-train it on purpose with `python -m vlr_lib encoder --retrain`")
N_CELLS = GRID * GRID
# What the pretraining head predicts, with the number of classes of each.
ATTRIBUTES = {"count": MAX_OBJECTS, "occupied": 2, "color": len(COLORS), "shape": len(SHAPES), "size": len(SIZES)}


def default_cache_dir() -> Path:
    """The workbook's cache folder (``vlr_lib.paths.cache_root``: $VLR_CACHE, else $XDG_CACHE_HOME/vlr-workbook,
    else ~/.cache/vlr-workbook), never relative to the working directory."""
    return cache_root()


@dataclass(frozen=True)
class EncoderSettings:
    """What the pretrained encoder is built from; every field is part of its cache's request.

    seed seeds the pool (its own SeedSequence branch), the initial weights and the batch
    order. The defaults are the recipe of the shipped encoder (``shipped_encoder``); they pretrain in
    about 2 minutes single-threaded (``python -m vlr_lib encoder --retrain``).
    """

    pool_size: int = 4000
    held_out: int = 1000
    seed: int = 0
    image_size: int = 64
    width: int = 32
    epochs: int = 10
    batch_size: int = 32
    lr: float = 1e-2

    def __post_init__(self) -> None:
        lowest = {"pool_size": 1, "held_out": 1, "seed": 0, "image_size": 16, "width": 2, "epochs": 1, "batch_size": 1}
        for name, low in lowest.items():  # plain Python numbers, so that the request is JSON
            object.__setattr__(self, name, check_int(name, getattr(self, name), low))
        object.__setattr__(self, "lr", check_positive("lr", self.lr))

    def request(self) -> dict[str, Any]:
        """The manifest fields a cache must match."""
        return {"format_version": FORMAT_VERSION, **asdict(self), "torch_version": torch.__version__}


def encoder_dir(settings: EncoderSettings | None = None, root: str | os.PathLike | None = None) -> Path:
    """The cache folder of one request: <root>/shapes-encoder-<image size>px-<hash of the request>."""
    settings = _settings(settings)
    digest = hashlib.sha256(json.dumps(settings.request(), sort_keys=True).encode()).hexdigest()[:12]
    return Path(root if root is not None else default_cache_dir()) / f"shapes-encoder-{settings.image_size}px-{digest}"


# ---------------------------------------------------------------- the task
def scene_labels(scenes: Scenes) -> dict[str, Tensor]:
    """Targets of the pretraining task, int64: "count" [N] (n_objects - 1) and per grid cell [N, 9]
    "occupied" (0/1), "color", "shape", "size" (-1 on empty cells, which are not scored)."""
    n = len(scenes)
    labels = {"count": torch.from_numpy(scenes.n_objects - 1)}
    cells = np.full((3, n, N_CELLS), -1, dtype=np.int64)
    present = scenes.attrs[:, :, 3] >= 0
    rows, slots = np.nonzero(present)
    cells[:, rows, scenes.attrs[rows, slots, 3]] = scenes.attrs[rows, slots, :3].T
    labels["occupied"] = torch.from_numpy((cells[0] >= 0).astype(np.int64))
    labels.update({name: torch.from_numpy(c) for name, c in zip(("color", "shape", "size"), cells)})
    return labels


class ShapesEncoder(nn.Module):
    """The frozen encoder: ``forward(images)`` gives the exported features [N, 12 * width].

    ``cnn`` is a ``models.TinyCNN`` without its projection (the retrieval heads project);
    ``mean`` / ``std`` are the pool's feature statistics and ``block_weight`` the per-dimension
    weight that gives the three pooled blocks equal shares; ``cell_head`` and ``count_head``
    are the pretraining task's classifiers (see `scene_logits`). ``manifest`` is the cache's.
    """

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.cnn = TinyCNN(out_dim=1, width=width)
        self.cnn.fc = nn.Identity()  # the pooled features are the export; the projection is the head's job
        blocks = self.cnn.pooled_blocks
        self.dim = sum(blocks)
        self.cell_head = nn.Linear(self.cnn.channels, sum(ATTRIBUTES.values()) - MAX_OBJECTS)
        self.count_head = nn.Linear(self.dim, MAX_OBJECTS)
        self.register_buffer("mean", torch.zeros(self.dim))
        self.register_buffer("std", torch.ones(self.dim))
        weight = torch.cat([torch.full((b,), w) for b, w in zip(blocks, block_weights(blocks))])
        self.register_buffer("block_weight", weight)
        self.manifest: dict[str, Any] = {}

    def forward(self, images: Tensor) -> Tensor:
        return (self.cnn.pooled(images) - self.mean) / self.std * self.block_weight

    def scene_logits(self, images: Tensor) -> dict[str, Tensor]:
        """Logits of the pretraining task: "count" [N, 3]; per cell [N, 9, classes] for the others."""
        h = self.cnn.feature_map(images)
        cells = self.cell_head(F.adaptive_avg_pool2d(h, GRID).flatten(2).transpose(1, 2))  # [N, 9, 14]
        per_cell = ("occupied", "color", "shape", "size")
        split = cells.split([ATTRIBUTES[k] for k in per_cell], dim=-1)
        return {"count": self.count_head(self.cnn.pool(h)), **dict(zip(per_cell, split))}


def block_weights(blocks: tuple[int, ...]) -> tuple[float, ...]:
    """Weight of each block of standardised features so that each carries the same expected squared norm."""
    return tuple(math.sqrt(min(blocks) / b) for b in blocks)


def _task_loss(logits: dict[str, Tensor], labels: dict[str, Tensor]) -> Tensor:
    """Sum over attributes of the mean cross-entropy (empty cells ignored for colour, shape, size)."""
    return sum(F.cross_entropy(logits[k].flatten(0, -2), labels[k].flatten(), ignore_index=-1) for k in ATTRIBUTES)


@torch.no_grad()
def task_accuracy(encoder: ShapesEncoder, images: Tensor, labels: dict[str, Tensor]) -> dict[str, float]:
    """Accuracy per attribute (colour, shape, size on occupied cells), and "scene": every prediction right."""
    logits = _batched(encoder.scene_logits, images)
    out, every = {}, torch.ones(images.shape[0], dtype=torch.bool)
    for name in ATTRIBUTES:
        scored = labels[name] >= 0
        right = logits[name].argmax(-1) == labels[name]
        out[name] = round(float(right[scored].float().mean()), 4)
        every &= (right | ~scored).reshape(images.shape[0], -1).all(dim=1)
    out["scene"] = round(float(every.float().mean()), 4)
    return out


# ---------------------------------------------------------------- building
def pool_scenes(settings: EncoderSettings) -> tuple[Scenes, Scenes]:
    """The pretraining pool and its held-out part (independent scenes, the pool's own seed branch)."""
    rng = np.random.default_rng(np.random.SeedSequence(settings.seed, spawn_key=(POOL_BRANCH,)))
    every = sample_scenes(settings.pool_size + settings.held_out, 0.0, rng, group_size=1)
    arrays = every.to_arrays()
    cut = settings.pool_size
    return (Scenes(**{k: v[:cut] for k, v in arrays.items()}), Scenes(**{k: v[cut:] for k, v in arrays.items()}))


def _images(scenes: Scenes, image_size: int) -> Tensor:
    return torch.from_numpy(render(scenes, image_size)).permute(0, 3, 1, 2).contiguous()


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Pin torch to one intra-op thread (float sums depend on the thread count), then restore it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _batched(fn, images: Tensor, batch_size: int = 256):
    """`fn` over chunks of `images`, outputs concatenated (tensors, or dicts of tensors)."""
    parts = [fn(images[s : s + batch_size]) for s in range(0, images.shape[0], batch_size)]
    if isinstance(parts[0], dict):
        return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
    return torch.cat(parts)


def _standardise(encoder: ShapesEncoder, pool_images: Tensor) -> None:
    """Set mean and std to the pool's; the std is floored at 1e-3 of its median, so that units that
    (almost) never fire on the pool (dead ReLUs) are not blown up when they do on a new image."""
    feats = _batched(encoder.cnn.pooled, pool_images)
    std = feats.std(dim=0)
    encoder.mean.copy_(feats.mean(dim=0))
    encoder.std.copy_(std.clamp_min(1e-3 * float(std.median()) + 1e-12))


def pretrain(settings: EncoderSettings | None = None, progress: bool = False) -> ShapesEncoder:
    """Train a ShapesEncoder on the pool (no cache); ``encoder.manifest`` holds the request and the
    held-out accuracy per attribute. Deterministic: single-threaded, seeded, global RNG untouched."""
    return _build(_settings(settings), train=True, progress=progress)


def random_encoder(settings: EncoderSettings | None = None) -> ShapesEncoder:
    """The same encoder never trained (seeded random weights), standardised with the same pool:
    the baseline that isolates what pretraining adds. Not cached (it takes a few seconds)."""
    return _build(_settings(settings), train=False)


def _build(settings: EncoderSettings, train: bool, progress: bool = False) -> ShapesEncoder:
    # enable_grad: the caller may be inside torch.no_grad() (e.g. extracting features on first use).
    with _one_thread(), torch.random.fork_rng(devices=[]), torch.enable_grad():
        torch.manual_seed(settings.seed)
        pool, held_out = pool_scenes(settings)
        images = _images(pool, settings.image_size)
        encoder = ShapesEncoder(settings.width)
        if train:
            _fit(encoder, images, scene_labels(pool), settings, progress)
        encoder.eval().requires_grad_(False)
        with torch.no_grad():
            _standardise(encoder, images)
        accuracy = task_accuracy(encoder, _images(held_out, settings.image_size), scene_labels(held_out))
    manifest = _manifest(settings, encoder, accuracy)
    encoder.manifest = manifest if train else dict(manifest, epochs=0)
    return encoder


def _fit(encoder: ShapesEncoder, images: Tensor, labels: dict[str, Tensor], settings: EncoderSettings,
         progress: bool) -> None:
    """Adam with a one-cycle learning rate over `settings.epochs` shuffled passes of the pool."""
    from tqdm.auto import tqdm

    opt = torch.optim.Adam(encoder.parameters(), lr=settings.lr)
    steps_per_epoch = -(-settings.pool_size // settings.batch_size)
    schedule = torch.optim.lr_scheduler.OneCycleLR(opt, settings.lr, total_steps=settings.epochs * steps_per_epoch)
    order = torch.Generator().manual_seed(settings.seed)
    for _ in tqdm(range(settings.epochs), desc="pretraining the shapes encoder", disable=not progress):
        for idx in torch.randperm(settings.pool_size, generator=order).split(settings.batch_size):
            loss = _task_loss(encoder.scene_logits(images[idx]), {k: v[idx] for k, v in labels.items()})
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            schedule.step()


def _manifest(settings: EncoderSettings, encoder: ShapesEncoder, accuracy: dict[str, float]) -> dict[str, Any]:
    return {
        **settings.request(),
        "architecture": f"TinyCNN(width={settings.width}) without projection; pretraining heads: "
                        "per-cell linear on the 3x3-pooled map, count linear on the pooled features",
        "pool": f"sample_scenes(pool_size + held_out, difficulty=0, group_size=1) from "
                f"SeedSequence(seed, spawn_key=({POOL_BRANCH},))",
        "export": "TinyCNN.pooled, standardised with the pool statistics, blocks weighted "
                  + str(block_weights(encoder.cnn.pooled_blocks)),
        "feature_dim": encoder.dim,
        "threads": 1,
        "pretrain_accuracy": accuracy,
    }


# ---------------------------------------------------------------- the cache
class _Unusable(Exception):
    """A cache that is stale or corrupt: rebuilt with a warning."""


def _read(path: Path, what: str) -> bytes:
    """The file's bytes; PermissionError says so, any other failure makes the cache unusable."""
    try:
        return read_regular(path)  # never a FIFO's read, which would hang
    except PermissionError as err:
        raise PermissionError(f"cannot read the shapes encoder cache {what} {str(path)!r}: permission denied; "
                              "fix its permissions, set VLR_CACHE to a folder you own, or pass cache_dir") from err
    except NotRegularFileError as err:
        raise _Unusable(f"{path} is {err.kind}, not a regular file") from err
    except OSError as err:
        raise _Unusable(f"cannot read {path}: {err}") from err


def _load(cache_dir: Path, request: dict[str, Any]) -> ShapesEncoder | None:
    """The cached encoder, None when there is none; raises _Unusable when stale or corrupt."""
    try:
        manifest = json.loads(_read(cache_dir / MANIFEST_FILE, "manifest"))
    except _Unusable as err:
        if isinstance(err.__cause__, FileNotFoundError):
            return None  # never built (the manifest is written last)
        raise
    except ValueError as err:
        raise _Unusable(f"{cache_dir / MANIFEST_FILE} is not valid JSON ({err})") from err
    if not isinstance(manifest, dict):
        raise _Unusable(f"{cache_dir / MANIFEST_FILE} does not hold a JSON object")
    diff = [f"{k}: cached {manifest.get(k)!r} != requested {v!r}" for k, v in request.items() if manifest.get(k) != v]
    if diff:
        raise _Unusable(f"the cache at {str(cache_dir)!r} was built for other settings ({'; '.join(diff)})")
    blob = _read(cache_dir / WEIGHTS_FILE, "weights")
    try:
        state = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)
        encoder = ShapesEncoder(request["width"])
        encoder.load_state_dict(state)
    except Exception as err:  # noqa: BLE001 - any unreadable or mismatching weights file is a corrupt cache
        raise _Unusable(f"cannot load {cache_dir / WEIGHTS_FILE}: {foreign_objects(err) or err}") from err
    if content_hash(state) != manifest.get("content_hash"):
        raise _Unusable(f"the content hash of {cache_dir / WEIGHTS_FILE} does not match its manifest "
                        "(interrupted write or damaged file)")
    encoder.eval().requires_grad_(False)
    encoder.manifest = manifest
    return encoder


def _check_writable(cache_dir: Path) -> None:
    """Fail before training, not after, when the cache cannot be written."""
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=cache_dir):  # deleted on close, even by a crash on Linux
            pass
    except PermissionError as err:
        raise PermissionError(f"cannot write the shapes encoder cache at {str(cache_dir)!r}: permission denied; "
                              "set VLR_CACHE to a folder you own or pass cache_dir") from err


def _save(cache_dir: Path, encoder: ShapesEncoder) -> None:
    state = encoder.state_dict()
    encoder.manifest = dict(encoder.manifest, content_hash=content_hash(state), files=[WEIGHTS_FILE],
                            vlr_lib_version=__version__)
    atomic_write(cache_dir / WEIGHTS_FILE, lambda f: torch.save(state, f))
    text = json.dumps(encoder.manifest, indent=2, sort_keys=True) + "\n"
    atomic_write(cache_dir / MANIFEST_FILE, lambda f: f.write(text.encode()))


# ---------------------------------------------------------------- the shipped encoder
class EncoderFileError(ValueError):
    """The shipped encoder's files are missing, damaged or another encoder's; the message names the file."""


def _shipped_fail(path: Path, problem: str) -> EncoderFileError:
    return EncoderFileError(f"the shipped shapes encoder {path} {problem}; {RESTORE}")


def manifest_hash(manifest: dict[str, Any]) -> str:
    """sha256 of the manifest's canonical JSON (sorted keys, no spaces) without :data:`MANIFEST_HASH`, as a
    record's ``manifest_sha256`` (``experiments.record.manifest_hash``)."""
    rest = {k: v for k, v in manifest.items() if k != MANIFEST_HASH}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


#: The shipped manifest's fields besides the recipe (EncoderSettings' fields), and their JSON types.
SHIPPED_TYPES: dict[str, type] = {
    "format_version": int, "torch_version": str, "feature_dim": int, "file": str, "sha256": str, "content_hash": str,
    "pretrain_accuracy": dict, "trained_with": dict, MANIFEST_HASH: str}
TRAINED_WITH_TYPES: dict[str, type] = {"kernels": str, "threads": int, "cpu": str, "date": str}


def _field_problem(manifest: dict[str, Any]) -> str | None:
    """The first field of the manifest that is missing or of another type or range, named."""
    for name, kind in SHIPPED_TYPES.items():
        if name not in manifest:
            return f"has no {name}"
        if not isinstance(manifest[name], kind) or isinstance(manifest[name], bool):
            return f"has a {type(manifest[name]).__name__} for {name} ({manifest[name]!r:.40}), not a {kind.__name__}"
    for field in fields(EncoderSettings):  # the recipe, checked one field at a time so that the message names it
        if field.name not in manifest:
            return f"has no {field.name}"
        try:
            EncoderSettings(**{field.name: manifest[field.name]})
        except (TypeError, ValueError) as err:
            return f"has a bad {field.name} ({manifest[field.name]!r:.40}: {err})"
    accuracy = manifest["pretrain_accuracy"]
    for name in (*ATTRIBUTES, "scene"):
        value = accuracy.get(name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
            return f"has no accuracy in [0, 1] for pretrain_accuracy.{name} (got {value!r:.40})"
    for name, kind in TRAINED_WITH_TYPES.items():
        if not isinstance(manifest["trained_with"].get(name), kind):
            return f"has no {kind.__name__} for trained_with.{name}"
    if manifest["file"] != WEIGHTS_FILE or len(manifest["sha256"]) != 64:
        return f"names another weights file than {WEIGHTS_FILE} (file {manifest['file']!r:.40}) or no sha256 of one"
    return None


def manifest_problem(manifest: object) -> str | None:
    """What is wrong with a shipped encoder's manifest (None when it is sound): a field missing or of another type
    (named), no :data:`MANIFEST_HASH` (damaged, or written before it), or one its fields do not hash to."""
    if not isinstance(manifest, dict):
        return f"is not an encoder manifest (a JSON object), it holds a {type(manifest).__name__}"
    found = _field_problem(manifest)
    if found:
        return found
    if manifest[MANIFEST_HASH] != manifest_hash(manifest):
        return (f"does not hash to its {MANIFEST_HASH}: a field (its accuracy, date, recipe, ...) was edited by "
                "hand, so nothing it says is shown")
    return None


def _shipped_read(path: Path) -> bytes:
    """The bytes of a shipped file: a regular file only (a FIFO would hang the read)."""
    try:
        return read_regular(path)
    except FileNotFoundError:
        raise _shipped_fail(path, "is missing") from None
    except NotRegularFileError as err:
        raise _shipped_fail(path, f"is {err.kind}, not a regular file (never read)") from None
    except OSError as err:
        raise _shipped_fail(path, f"cannot be read ({type(err).__name__}: {err})") from None


def _shipped_manifest(root: Path) -> dict[str, Any]:
    path = root / MANIFEST_FILE
    data = _shipped_read(path)
    try:
        manifest = json.loads(data)
    except ValueError as err:  # not UTF-8, not JSON
        raise _shipped_fail(path, f"cannot be read ({type(err).__name__}: {err})") from None
    problem = manifest_problem(manifest)
    if problem:
        raise _shipped_fail(path, problem)
    return manifest


def _shipped_files(root: Path) -> tuple[dict[str, Any], bytes]:
    """The checked manifest and the weights' bytes, which hash to the manifest's sha256."""
    manifest = _shipped_manifest(root)
    path = root / WEIGHTS_FILE
    blob = _shipped_read(path)
    digest = hashlib.sha256(blob).hexdigest()
    if digest != manifest["sha256"]:
        raise _shipped_fail(path, f"has sha256 {digest[:12]}..., its manifest says {manifest['sha256'][:12]}... "
                                  "(damaged, or another encoder)")
    return manifest, blob


def shipped_sha256(root: str | os.PathLike | None = None) -> str:
    """The sha256 of the shipped encoder's weights file, checked against its manifest (EncoderFileError if not)."""
    return _shipped_files(Path(root) if root is not None else SHIPPED_DIR)[0]["sha256"]


_LOADED: dict[tuple[str, str], ShapesEncoder] = {}  # (folder, manifest hash): each content loaded once


def shipped_encoder(root: str | os.PathLike | None = None) -> ShapesEncoder:
    """The pretrained encoder that ships with the package (checked by sha256; never trained here).

    `root` is the folder holding encoder.pt and manifest.json (default ``SHIPPED_DIR``). Its
    ``manifest`` holds the recipe, the held-out accuracy, the sha256 and how it was trained; the manifest
    hashes to its own ``manifest_sha256``, so an edited field is refused rather than shown.
    """
    root = Path(root) if root is not None else SHIPPED_DIR
    manifest, blob = _shipped_files(root)
    key = (str(root), manifest[MANIFEST_HASH])  # the manifest's hash covers the weights' sha256 too
    if key not in _LOADED:
        if len(_LOADED) >= 2:
            _LOADED.clear()
        _LOADED[key] = _load_shipped(root / WEIGHTS_FILE, manifest, blob)
    return _LOADED[key]


def _load_shipped(path: Path, manifest: dict[str, Any], blob: bytes) -> ShapesEncoder:
    """Frozen, eval mode: safe to share."""
    try:
        state = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)
        encoder = ShapesEncoder(manifest["width"])
        encoder.load_state_dict(state)
    except Exception as err:  # noqa: BLE001 - whatever torch says, the file is not this encoder's weights
        raise _shipped_fail(path, f"cannot be loaded as the weights of the encoder its manifest describes (width "
                                  f"{manifest['width']}; {type(err).__name__})") from None
    encoder.eval().requires_grad_(False)
    encoder.manifest = manifest
    return encoder


def _is_shipped_recipe(settings: EncoderSettings) -> bool:
    return settings == EncoderSettings()


def write_encoder(folder: str | os.PathLike, encoder: ShapesEncoder, trained_with: dict[str, Any]) -> dict[str, Any]:
    """Write `encoder` as a shipped encoder (weights first, manifest last, each atomically); return the manifest.

    The manifest adds to ``encoder.manifest`` the weights' sha256 and `trained_with` (kernels,
    threads, CPU, date: what the bytes depend on), and is sealed by :func:`write_manifest`."""
    folder = Path(folder)
    buffer = io.BytesIO()
    state = encoder.state_dict()
    torch.save(state, buffer)
    blob = buffer.getvalue()
    manifest = {**encoder.manifest, "content_hash": content_hash(state), "file": WEIGHTS_FILE,
                "sha256": hashlib.sha256(blob).hexdigest(), "trained_with": trained_with,
                "command": "python -m vlr_lib encoder --retrain", "vlr_lib_version": __version__}
    sealed = _sealed(manifest)  # checked before the weights are replaced
    atomic_write(folder / WEIGHTS_FILE, lambda f: f.write(blob))
    return write_manifest(folder, sealed)


def _sealed(manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` with its :data:`MANIFEST_HASH` over every other field; a ValueError when it is no sound manifest."""
    sealed = {**{k: v for k, v in manifest.items() if k != MANIFEST_HASH}, MANIFEST_HASH: manifest_hash(manifest)}
    problem = manifest_problem(sealed)
    if problem:
        raise ValueError(f"manifest {problem}")
    return sealed


def write_manifest(folder: str | os.PathLike, manifest: dict[str, Any]) -> dict[str, Any]:
    """Write `manifest` as ``folder/manifest.json`` (atomically) with its :data:`MANIFEST_HASH` over every other
    field, and return it as written. A manifest that :func:`manifest_problem` refuses is never written."""
    sealed = _sealed(manifest)
    text = json.dumps(sealed, indent=2, sort_keys=True) + "\n"
    atomic_write(Path(folder) / MANIFEST_FILE, lambda f: f.write(text.encode()))
    return sealed


def load_or_train_encoder(
    cache_dir: str | os.PathLike | None = None,
    settings: EncoderSettings | None = None,
    *,
    rebuild: bool = False,
    progress: bool = True,
) -> ShapesEncoder:
    """The pretrained encoder of `settings` (default EncoderSettings()), from its cache or trained once.

    The default recipe (``EncoderSettings()``, no `cache_dir`, no `rebuild`) is the encoder
    that ships with the package (:func:`shipped_encoder`): never trained here.
    `cache_dir` is the folder holding encoder.pt and manifest.json; by default
    ``encoder_dir(settings)`` under ``default_cache_dir()``. A cache built for other
    settings, or corrupt, is rebuilt with a RuntimeWarning; `rebuild` forces it.
    Loading takes milliseconds; training about 35 s with the defaults on a 2-core CPU.
    """
    settings = _settings(settings)
    if cache_dir is None and not rebuild and _is_shipped_recipe(settings):
        return shipped_encoder()
    cache_dir = Path(cache_dir) if cache_dir is not None else encoder_dir(settings)
    if not rebuild:
        try:
            encoder = _load(cache_dir, settings.request())
            if encoder is not None:
                return encoder
        except _Unusable as err:
            warnings.warn(f"rebuilding the shapes encoder cache: {err}", RuntimeWarning, stacklevel=2)
    _check_writable(cache_dir)
    encoder = pretrain(settings, progress)
    _save(cache_dir, encoder)
    return encoder


# ---------------------------------------------------------------- extraction
def _as_images(images: object) -> Tensor:
    """uint8 [N, 3, H, W] from a Dataset split with an "image" column or a uint8 array/tensor (NHWC or NCHW)."""
    if isinstance(images, datasets.DatasetDict):
        raise TypeError("images must be one split (e.g. dd['train']), got a DatasetDict")
    if isinstance(images, datasets.Dataset):
        if "image" not in images.column_names:
            raise ValueError(f"images has no 'image' column (columns: {images.column_names})")
        if len(images) == 0:
            raise ValueError("images is empty")
        images = np.stack([np.asarray(im.convert("RGB")) for im in images["image"]])
    if isinstance(images, np.ndarray):
        images = torch.from_numpy(images)
    if not isinstance(images, Tensor):
        raise TypeError(f"images must be a datasets.Dataset, numpy array or torch.Tensor, got {type(images).__name__}")
    if images.dtype != torch.uint8 or images.dim() != 4 or 3 not in (images.shape[1], images.shape[-1]):
        raise ValueError(f"images must be uint8 [N, H, W, 3] or [N, 3, H, W], got {images.dtype} "
                         f"{tuple(images.shape)}")
    if images.shape[0] == 0:
        raise ValueError("images is empty")
    # On the CPU (where the encoder runs, deterministically) and in one memory layout whatever the
    # input's: convolutions pick their algorithm (and so their float sums) by layout.
    return (images if images.shape[1] == 3 else images.permute(0, 3, 1, 2)).cpu().contiguous()


def pretrained_image_features(
    images: datasets.Dataset | np.ndarray | Tensor,
    *,
    encoder: ShapesEncoder | None = None,
    cache_dir: str | os.PathLike | None = None,
    settings: EncoderSettings | None = None,
    progress: bool = True,
) -> Tensor:
    """Frozen pretrained features of shapes images, float32 [N, 12 * width] (384 by default).

    `images`: a split of a shapes DatasetDict (its "image" column) or uint8 images
    [N, H, W, 3] / [N, 3, H, W]. The encoder is `encoder`, or the cached one of `settings`
    (default: EncoderSettings with the images' size): the shipped one for 64-pixel images, else
    trained once into a cache (`load_or_train_encoder`). Deterministic: single-threaded in fixed chunks of 256 images,
    so the same images give the same bytes (the chunk size changes float rounding, ~1e-7).
    """
    x = _as_images(images)
    if encoder is not None and (settings is not None or cache_dir is not None):
        raise ValueError("pass either encoder or settings / cache_dir, not both")
    if x.shape[2] != x.shape[3]:
        raise ValueError(f"images must be square, got {x.shape[2]}x{x.shape[3]}")
    if encoder is None:
        settings = settings or EncoderSettings(image_size=int(x.shape[2]))
        encoder = load_or_train_encoder(cache_dir, settings, progress=progress)
    elif not isinstance(encoder, ShapesEncoder):
        raise TypeError(f"encoder must be a ShapesEncoder, got {type(encoder).__name__}")
    trained_on = encoder.manifest.get("image_size")
    if trained_on != x.shape[2]:
        raise ValueError(f"images are {x.shape[2]}x{x.shape[3]} pixels but the encoder was pretrained on "
                         f"{trained_on}x{trained_on}; use an encoder with image_size={x.shape[2]}")
    with _one_thread(), torch.no_grad():
        return _batched(encoder, x)


def _settings(settings: EncoderSettings | None) -> EncoderSettings:
    if settings is None:
        return EncoderSettings()
    if not isinstance(settings, EncoderSettings):
        raise TypeError(f"settings must be an EncoderSettings, got {type(settings).__name__}")
    return settings
