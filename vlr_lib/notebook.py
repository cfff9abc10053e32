"""The one settings cell of every notebook (the small demo batches they explore live in ``vlr_lib.demo``).

Environment variables (read once, here, through ``vlr_lib.env``: empty is unset):
- VLR_FAST=1      fast mode (what CI runs): small sizes, few epochs, one CPU thread, same code path;
- VLR_DATA        "shapes" (default, embedded, CPU) or "flickr30k" (cached features, GPU);
- VLR_DEVICE      "cpu", "cuda", ... (default: cuda when available, else cpu);
- VLR_DATA_PATH   flickr30k: a local copy of the data (default: the copy data_scripts/prepare_flickr30k.py
                  saved, else the Hub; read by ``vlr_lib.data.flickr30k.resolve_source``);
- VLR_FLICKR_REVISION  flickr30k: a commit hash (or its first 7+ characters) that chooses between
                  feature caches of several commits;
- VLR_RERUN=1     full mode re-trains instead of opening the recorded runs that ship with the
                  workbook (``vlr_lib.experiments.record``); fast mode always trains;
- VLR_BOOK=1      set by `make book` only: figures and explorers for the static book (vlr_lib.book).
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch

from . import env
from .data import DATA_MODES
from .data_sizes import SIZES
from .paths import feature_cache_root
from .train import Triple

T = TypeVar("T")
# The plotly JSON output: JupyterLab, Notebook 7 and VS Code draw it with the plotly.js they ship, so
# nothing is fetched from a CDN (an offline classroom sees no failed request) and outputs stay small.
PLOTLY_RENDERER = "plotly_mimetype"
# Where plotly itself detected a hosted notebook that cannot draw that output, its choice is kept.
HOSTED_RENDERERS = ("colab", "kaggle", "azure", "vscode", "nteract", "cocalc", "databricks")
#: The shapes images (fast, full) of the training chapters' two splits (``training_features``; the records of
#: notebooks 09 and 11 are keyed by them).


@dataclass(frozen=True)
class Settings:
    """What a notebook needs to know about this run."""

    fast: bool
    data: str
    device: torch.device
    seed: int
    rerun: bool = False

    @property
    def use_record(self) -> bool:
        """Open the shipped records (full mode, unless VLR_RERUN=1); fast mode trains its small runs."""
        return not (self.fast or self.rerun)

    def pick(self, fast: T, full: T) -> T:
        """`fast` in fast mode, `full` otherwise: one place decides every size."""
        return fast if self.fast else full

    def __str__(self) -> str:
        mode = "fast" if self.fast else ("full, re-training" if self.rerun else "full")
        return f"vlr-workbook settings: {mode} mode, data={self.data}, device={self.device}, seed={self.seed}"


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _set_renderer(renderer: str | None) -> None:
    """`renderer` as plotly's default, unless PLOTLY_RENDERER (plotly's own variable) or a hosted notebook decided."""
    import plotly.io as pio

    from .viz.html import use_renderer

    if env.book_mode():  # `make book`: figures as HTML for the book's one local plotly.js
        use_renderer()
        return
    if renderer is None or os.environ.get("PLOTLY_RENDERER") or pio.renderers.default in HOSTED_RENDERERS:
        return
    pio.renderers.default = renderer


def setup(seed: int = 0, renderer: str | None = PLOTLY_RENDERER) -> Settings:
    """Read the environment, seed every generator, set the plotly renderer; print a summary.

    `renderer`: plotly's default renderer for the notebook (None leaves plotly's choice). The
    environment variable PLOTLY_RENDERER (read by plotly) wins, e.g. for a static export.
    """
    data = env.choice("VLR_DATA", DATA_MODES, "shapes")
    from .train.device import parse_device

    device_name = env.text("VLR_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    device = parse_device(device_name, "VLR_DEVICE")  # a bad name or a missing GPU fails here, not in training
    settings = Settings(fast=env.flag("VLR_FAST"), data=data, device=device, seed=seed, rerun=env.flag("VLR_RERUN"))
    seed_everything(seed)
    if settings.fast and settings.device.type == "cpu":
        # Fast mode's matrices are tiny: threads gain nothing, and on a shared 2-core CI
        # machine two spinning threads stall each other (measured 10-50x slower).
        torch.set_num_threads(1)
    _set_renderer(renderer)
    print(settings)
    return settings


def longer_exercise(cfg: Settings, run: bool, what: str) -> bool:
    """Whether a longer exercise's solution trains its new runs now: in fast mode always (its small
    version takes seconds, and the tests run it), in full mode only when the reader set `run` in the
    cell (its runs take minutes, so a Run All stays within the chapter's time). Otherwise it prints
    `what` would train and how to train it. The cell is tagged ``book.LONGER_TAG``."""
    if not isinstance(run, bool):
        raise TypeError(f"run must be True or False, got {run!r}")
    if cfg.fast or run:
        return True
    print(f"A longer exercise, not trained on a Run All: {what}. Set RUN = True in this cell and run it to train.")
    return False


def training_features(
    cfg: Settings, n_train: tuple[int, int] = SIZES["chapters"]["n_train"],
    n_val: tuple[int, int] = SIZES["chapters"]["n_val"],
    test: bool = False,
) -> tuple[Triple, ...]:
    """(train, validation) frozen features (img, txt, caption_to_image) for the data mode of `cfg`;
    with `test`, (train, validation, test).

    Choices (epochs, hyperparameters) are made on validation; test is for one final report.
    - shapes: the synthetic data (`cfg.pick` of the sizes; the test split has the validation
      split's size) and its frozen features (vlr_lib.train.shapes_features: the pretrained shapes
      encoder's frozen image features and hashed bags of words);
    - flickr30k: cached CLIP ViT-B/32 features of the Karpathy splits -- train (29,000 images),
      validation (1,014) and test (1,000) -- found wherever data_scripts/extract_features.py
      wrote them (vlr_lib.paths.feature_cache_root; VLR_FLICKR_REVISION=<commit> chooses between
      cached commits). On a GPU, missing caches are built from VLR_DATA_PATH, the prepared copy
      or the Hub; elsewhere the error says what to run.
    """
    splits = ("train", "validation", "test") if test else ("train", "validation")
    if cfg.data == "shapes":
        from .data import make_shapes
        from .train import shapes_features

        n_test = cfg.pick(*n_val) if test else 1  # each split has its own random stream: train, validation unchanged
        data = make_shapes(n_train=cfg.pick(*n_train), n_val=cfg.pick(*n_val), n_test=n_test, seed=cfg.seed)
        feats = shapes_features(data, seed=cfg.seed, splits=splits)
        return tuple(feats[split] for split in splits)
    return _flickr30k_features(cfg.device, splits)


def _flickr30k_features(device: torch.device, splits: tuple[str, ...],
                        backbone: str = "clip-vit-b32") -> tuple[Triple, ...]:
    from .features import flickr_feature_dirs, load_features

    root = feature_cache_root()
    try:
        dirs = flickr_feature_dirs(root, backbone, revision=_flickr30k_revision(), splits=splits)
        sets = [load_features(dirs[split]) for split in splits]
    except FileNotFoundError:
        if device.type != "cuda":
            raise  # its message names the commands that build the cache
        built = _build_flickr30k_features(root, device, backbone)
        sets = [built[split] for split in splits]
    return tuple((fs.img.float(), fs.txt.float(), fs.caption_to_image) for fs in sets)


def _flickr30k_revision() -> str | None:
    """VLR_FLICKR_REVISION when it is a commit hash or a prefix of one (a branch name cannot choose a cache)."""
    import re

    from .data.flickr30k import ENV_REVISION

    value = env.text(ENV_REVISION).lower()
    return value if re.fullmatch(r"[0-9a-f]{7,40}", value) else None


def _build_flickr30k_features(root: Path, device: torch.device, backbone: str) -> dict:
    """Encode the three Karpathy splits once (a GPU job) into the caches extract_features.py writes."""
    from .data.flickr30k import resolve_source
    from .features import FLICKR_SPLITS, flickr30k_features

    source = resolve_source()  # VLR_DATA_PATH, the prepared copy, else the Hub (the error says how to work offline)
    return flickr30k_features(source, root, splits=FLICKR_SPLITS, backbone=backbone, device=device)
