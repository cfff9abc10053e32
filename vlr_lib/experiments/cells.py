"""The cell runner of notebooks 10-12: what a race of cells trains under, on which data, and how.

A *race* is a set of (configuration, seed) cells trained with identical settings through
``vlr_lib.experiments.grid``: the showdown's (``vlr_lib.experiments.showdown``: every contestant), the tuned
comparison's (``vlr_lib.experiments.tuned``: a sweep per loss) and each condition's of the lessons
(``vlr_lib.experiments.lessons``: four losses). All three train the same way, here:

- :class:`ShowdownSpec` -- everything that defines a race (data, setting, seeds, schedule, model sizes), and
  :func:`spec_for`, its budget per data mode and setting at full or fast size (the showdown's, which the tuned
  comparison and the lessons share);
- :func:`load_data` -- the spec's train / validation / test inputs (:class:`ShowdownData`) and their cache id;
- :class:`ShowdownMetrics` -- the ``fit`` callback that adds the test split's metrics and COCOS on a fixed probe
  batch (:func:`probe_batch`) to every epoch, and keeps the epoch of best validation rsum;
- :func:`train_cells` -- every contestant x seed of a spec through ``grid`` (cached cell by cell), and
  :func:`retrain` -- one cell from scratch (the records' checked runs); both single-threaded on a CPU
  (:func:`cpu_threads`);
- :class:`Showdown` -- a finished race's table and how it was made (:func:`race_meta`, :func:`hardware`), rebuilt
  from its cells (:func:`from_cells`) or read from a shipped record (:func:`opened`).

Protocol (VSE++ / Bleeker & de Rijke): after every epoch the trainer records the validation metrics (rsum,
mAP@5, PR-AUC, ...; ``vlr_lib.train.evaluate``); the callback adds the same metrics on the *test* split and
COCOS of all four rules (``analysis.cocos_table``) on one fixed probe batch of training pairs. The reported
epoch of a run is the one with the best validation rsum ("sel_*" columns: its test metrics and its COCOS).

Data: ``shapes`` -- the synthetic set (``vlr_lib.data.shapes``) with the setting's inputs
(``vlr_lib.train.shapes_inputs``: frozen pretrained image features -- or the random encoder's,
``image_encoder="random"`` -- with hashed bag-of-words caption features or token ids, or the
images themselves); ``flickr30k`` -- CLIP ViT-B/32 features of the Karpathy split cached by
``data_scripts/extract_features.py`` (never downloaded or encoded here; the error says what to
run when they are missing), in the VSE++ setting with the dataset's captions as token ids.
"""
from __future__ import annotations

import json
import os
import platform
import re
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import torch
from torch import Tensor

from .. import __version__
from ..data import DATA_MODES
from ..data_sizes import SIZES
from ..features import flickr_feature_dirs
from ..paths import feature_cache_root, flickr30k_path, runs_dir
from . import record as R
from ..metrics import chance_rsum
from ..train import (SETTING_LABELS, TrainSettings, Triple, check_setting, default_device, preset,
                     probe_indices, shapes_inputs, split_metrics, with_caption_ids)
from .grid_search import GridResult, grid, tensor_id

#: Bump when the recorded metrics change (the trainer's or the callback's): it is part of every cell's cache key.
METRICS_VERSION = "showdown-metrics-v2"
SEEDS = (0, 1, 2)
FLICKR_BACKBONE = "clip-vit-b32"
FLICKR_CHOICE = ("revision", "weights", "dtype")
CELL_KEY = re.compile(r"[0-9a-f]{1,64}")  # grid_search.cell_key: a hex digest (never a path)
_SHAPES = preset("shapes", "features")  # ShowdownSpec's defaults; spec_for sets every setting's own

# --------------------------------------------------------------------------- the spec


@dataclass(frozen=True)
class ShowdownSpec:
    """Everything that defines a showdown table (all of it is compared before a stored table is reused)."""

    data: str = "shapes"
    fast: bool = False
    setting: str = "features"  # features | vsepp | e2e (vlr_lib.train.inputs)
    seeds: tuple[int, ...] = SEEDS
    epochs: int = _SHAPES["epochs"]  # the schedule and model sizes: settings.preset's (these: shapes, features)
    batch_size: int = _SHAPES["batch_size"]
    lr: float = _SHAPES["lr"]
    lr_decay_epoch: int | None = _SHAPES["lr_decay_epoch"]  # None: halfway
    grad_clip: float | None = _SHAPES["grad_clip"]  # the gradient norm's clip (vsepp: 2.0, as VSE++ trains)
    optimizer_at_switch: str = "fresh"  # a warm-up schedule's switch: a fresh Adam, or "carry" the old state
    dim: int = _SHAPES["dim"]
    head: str = "linear"
    sampling: str = _SHAPES["sampling"]
    n_train: int | None = 1000  # shapes: images per split; flickr30k: None = the whole split
    n_val: int | None = 200
    n_test: int | None = 200
    difficulty: float = 0.5
    data_seed: int = 0
    probe: int = 128  # COCOS probe batch (distinct training images, one caption each)
    image_encoder: str = "pretrained"  # shapes, features / vsepp: the frozen image encoder (or "random")
    text_encoder: str = "gru"  # vsepp / e2e: the text encoder trained from scratch ...
    word_dim: int | None = _SHAPES["word_dim"]  # ... its word embedding size (None: the model's default)
    hidden: int | None = _SHAPES["hidden"]  # ... and the GRU's
    width: int = 32  # e2e: the TinyCNN's width
    min_count: int = _SHAPES["min_count"]  # vsepp / e2e: a word joins the vocabulary when the training captions use it this often
    metrics: str = METRICS_VERSION
    device: str | None = field(default=None, compare=False)
    cache_root: str | None = field(default=None, compare=False)
    # flickr30k: which cached feature set (vlr_lib.features.flickr_feature_dirs; None: the only one, default weights)
    revision: str | None = None
    weights: str | None = None
    dtype: str | None = None
    data_path: str | None = field(default=None, compare=False)  # flickr30k vsepp: a local copy of the captions

    def key(self) -> dict:
        """The settings a stored table must match (device and cache location excluded)."""
        d = asdict(self)
        for name in ("device", "cache_root", "data_path"):
            d.pop(name)
        for name in FLICKR_CHOICE:  # in the key when named (None leaves the keys of earlier tables as they were)
            if d[name] is None:
                d.pop(name)
        return json.loads(json.dumps(d))

    @property
    def out(self) -> Path:
        return runs_dir() / f"showdown-{self.data}-{self.setting}-{'fast' if self.fast else 'full'}"

    def settings(self) -> TrainSettings:
        """The training settings every cell shares (the COCOS probe is the callback's, so the trainer's is off)."""
        return TrainSettings(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr,
                             lr_decay_epoch=self.lr_decay_epoch, grad_clip=self.grad_clip,
                             optimizer_at_switch=self.optimizer_at_switch, sampling=self.sampling,
                             probe_batch=0, device=self.device, progress=False)

    def model(self) -> dict:
        """The model arguments every cell shares (``trainer(spec.setting)(..., **spec.model())``)."""
        if self.setting == "features":
            return {"dim": self.dim, "head": self.head}
        text = {"text_encoder": self.text_encoder, "dim": self.dim}
        if self.setting == "e2e":
            return {**text, "width": self.width}
        return {**text, "head": self.head, "word_dim": self.word_dim, "hidden": self.hidden}


#: The data of each showdown, full size and fast (the schedule and model sizes are ``settings.preset``'s).
FULL_DATA = {"shapes": {}, "flickr30k": {"n_train": None, "n_val": None, "n_test": None, "difficulty": 0.0}}
FAST_DATA = {"shapes": {**SIZES["showdown fast"], "probe": 50},
             "flickr30k": {**FULL_DATA["flickr30k"], "n_train": 2900}}


def spec_for(data: str = "shapes", fast: bool = False, setting: str = "features", **overrides) -> ShowdownSpec:
    """The showdown of a data mode and setting at full or fast (CI) size.

    shapes, features, full: 1000 / 200 / 200 images, 20 epochs, batch 128, lr 1e-3 decayed
    x0.1 after 10 epochs, 256-d linear heads: ~20 min for 72 runs on a 2-core CPU (two processes). The budget
    was chosen on validation so that the runs converge (docs/results.md, run 7: at most a
    quarter of the runs select their last epoch; the earlier 10 epochs at lr 2e-4 left 79% of
    them still rising). vsepp: the same, with a GRU text encoder from scratch (32-d words, 64-d
    GRU: ``models.TextGRU``'s defaults, as end to end) at lr 2e-3, the lr the project trains its
    from-scratch encoders with (VSE++ uses 2e-4, for ~90x more steps), and the gradient's norm
    clipped at 2 as VSE++ and VSE∞ train. e2e:
    ``TrainSettings.end_to_end()`` (one caption per image, batch 32, lr 2e-3, 64-d) for 40 epochs
    (20 left two thirds of the runs still rising).
    Fast (every setting): 200 / 100 / 100 images, 4 epochs of one caption per image, batch 50,
    lr 3e-3, 64-d: seconds. flickr30k: the Karpathy split (29,000 / 1,014 / 1,000 images) on
    CLIP features, 15 epochs, 512-d heads; vsepp: VSE++'s sizes (1024-d joint space, 300-d
    words, a 1024-d GRU, words seen at least 4 times); fast keeps 2,900 training images and
    2 epochs. e2e needs the shapes images: flickr30k has cached features only. The schedules and
    model sizes are ``settings.PRESETS`` and ``settings.FAST``; the data sizes :data:`FULL_DATA` / :data:`FAST_DATA`.
    """
    if data not in DATA_MODES:
        raise ValueError(f"data must be one of {DATA_MODES}, got {data!r}")
    check_setting(setting)
    if data == "flickr30k" and setting == "e2e":
        raise ValueError("setting 'e2e' trains a CNN on the shapes images; flickr30k has cached image features "
                         "only: use setting 'features' or 'vsepp'")
    sizes = FAST_DATA[data] if fast else FULL_DATA[data]
    base = ShowdownSpec(data=data, fast=fast, setting=setting, **preset(data, setting, fast), **sizes)
    return replace(base, **overrides)


# --------------------------------------------------------------------------- data


@dataclass
class ShowdownData:
    """Feature triples (img, txt, caption_to_image) of the three splits, a description and the cells' data id."""

    train: Triple
    val: Triple
    test: Triple
    description: str
    data_id: str


def _head(triple: Triple, n_images: int | None) -> Triple:
    """The first n images of a split and their captions (None: all)."""
    img, txt, c2i = triple
    if n_images is None or n_images >= img.shape[0]:
        return triple
    keep = c2i < n_images
    return img[:n_images], txt[keep], c2i[keep]


def _shapes_data(spec: ShowdownSpec) -> ShowdownData:
    from ..data.shapes import make_shapes

    dd = make_shapes(n_train=spec.n_train, n_val=spec.n_val, n_test=spec.n_test, difficulty=spec.difficulty,
                     seed=spec.data_seed)
    inputs, vocab = shapes_inputs(dd, spec.setting, image_encoder=spec.image_encoder, min_count=spec.min_count)
    img, txt = inputs["train"][0], inputs["train"][1]
    images = (f"{spec.image_encoder} frozen shapes-encoder image features ({img.shape[1]}-d, "
              "vlr_lib.shapes_encoder)") if spec.setting != "e2e" else f"the {tuple(img.shape[2:])} images"
    captions = (f"hashed uni+bigram bags of words ({txt.shape[1]}-d)" if vocab is None else
                f"token ids ({len(vocab)} words of the training captions)")
    desc = (f"shapes (synthetic, seed {spec.data_seed}, difficulty {spec.difficulty}): "
            f"{spec.n_train} / {spec.n_val} / {spec.n_test} images x 5 captions; {images} and {captions}, "
            f"vlr_lib.train.shapes_inputs")
    return ShowdownData(inputs["train"], inputs["validation"], inputs["test"], desc, "")


def _flickr_dirs(spec: ShowdownSpec) -> dict[str, Path]:
    """The cache folders of the spec's Flickr30K feature set (its revision, weights and dtype when named)."""
    root = spec.cache_root or str(feature_cache_root())
    return flickr_feature_dirs(root, FLICKR_BACKBONE, revision=spec.revision, weights=spec.weights, dtype=spec.dtype)


def _flickr_data(spec: ShowdownSpec) -> ShowdownData:
    """The Karpathy splits from the feature cache: epochs are selected on validation, test is reported."""
    from ..features import load_features

    dirs = _flickr_dirs(spec)
    sets = {split: load_features(dirs[split]) for split in ("train", "validation", "test")}
    triples = {s: _head((fs.img.float(), fs.txt.float(), fs.caption_to_image), n)
               for (s, fs), n in zip(sets.items(), (spec.n_train, spec.n_val, spec.n_test))}
    m = sets["train"].manifest
    n = {s: f"{t[0].shape[0]:,}" for s, t in triples.items()}
    desc = (f"Flickr30K Karpathy split ({m['dataset_id']}, revision {m.get('revision')[:12] or '-'}): "
            f"{n['train']} training images, {n['validation']} validation images (selection of the epoch), "
            f"{n['test']} test images (the reported numbers); frozen {m['backbone']} ({m.get('pretrained')}, "
            f"{m.get('dtype', 'float32')}) features, {sets['train'].dim}-d, cached by data_scripts/extract_features.py")
    hashes = "|".join(sets[s].manifest.get("content_hash", "?")[:16] for s in sets)
    return ShowdownData(triples["train"], triples["validation"], triples["test"], desc, f"flickr30k:{hashes}")


def _flickr_captions(spec: ShowdownSpec, data: ShowdownData) -> ShowdownData:
    """The VSE++ setting on Flickr30K: the cached image features with the dataset's captions as token ids, from
    the dataset the features were extracted from (``spec.data_path``, else the manifests' id and commit)."""
    from ..data.flickr30k import load_flickr30k, resolve_source
    from ..features import read_manifest

    dirs = _flickr_dirs(spec)
    manifests = {split: read_manifest(dirs[split]) for split in ("train", "validation", "test")}
    m = manifests["train"]
    if spec.data_path is not None:
        source = resolve_source(spec.data_path)
    elif str(m["dataset_id"]).startswith("flickr30k:"):
        raise FileNotFoundError(f"the Flickr30K features were extracted from a local copy ({m['dataset_id']}); "
                                "the VSE++ setting needs its captions: pass --data-path (data_path) to that copy")
    else:  # VLR_DATA_PATH or prepare_flickr30k's copy when it holds this commit, else the Hub at it
        source = resolve_source(repo_id=m["dataset_id"], revision=m.get("revision") or None)
        local = flickr30k_path()
        copy = resolve_source(local) if local is not None else None
        if copy is not None and (copy.dataset_id, copy.revision) == (source.dataset_id, source.revision):
            source = copy
    triples = dict(zip(manifests, (data.train, data.val, data.test)))
    inputs, vocab = with_caption_ids(load_flickr30k(source), triples, manifests, source.describe(), spec.min_count)
    desc = (f"{data.description}; captions as token ids ({len(vocab)} words seen at least {spec.min_count} times "
            "in the training captions)")
    data_id = f"{data.data_id}|captions:min_count={spec.min_count}"
    return ShowdownData(inputs["train"], inputs["validation"], inputs["test"], desc, data_id)


def load_data(spec: ShowdownSpec) -> ShowdownData:
    """Train / validation / test inputs of the spec's data mode and setting, and a data id for the cell cache."""
    data = _shapes_data(spec) if spec.data == "shapes" else _flickr_data(spec)
    if spec.data == "flickr30k" and spec.setting == "vsepp":
        data = _flickr_captions(spec, data)
    tensors = [t for triple in (data.train, data.val, data.test) for t in triple]
    data.data_id = f"{METRICS_VERSION}|{spec.data}|{data.data_id or tensor_id(*tensors)}|probe={spec.probe}"
    return data


# --------------------------------------------------------------------------- the test split and COCOS


def probe_batch(train: Triple, size: int) -> tuple[Tensor, Tensor]:
    """A fixed COCOS probe: `size` distinct training images with one caption each (the same for every run)."""
    img, txt, c2i = train
    caps = probe_indices(c2i, img.shape[0], size, seed=0)
    return img[c2i[caps]], txt[caps]


class ShowdownMetrics:
    """A ``fit`` callback: test metrics and probe COCOS per epoch, and the test metrics of the best epoch so far.

    The trainer records the validation metrics itself; this adds to each epoch's
    record (grid stores the whole history in its cell): ``test`` -- the same
    metrics on the test split (``evaluate.split_metrics``: R@1/5/10 both ways and
    rsum in percent, ``map5`` (i2t mAP@5) and ``pr_auc`` as fractions, pos_sim,
    hardneg_sim); ``probe_cocos`` -- for each COCOS rule and direction the mean
    C^q over active queries, C^0 and (NT-Xent) W^{qv-}, W^{qv+} on the fixed
    probe batch; ``sel`` -- ``test`` and ``probe_cocos`` of the epoch with the
    best *validation* rsum so far (earliest on ties) and its number, so the final
    record (the grid's row) carries the selected checkpoint. It relies on the
    callback contract of ``vlr_lib.train.engine`` (JSON-able keys added to the
    record are kept in the history).
    """

    def __init__(self, test: Triple, probe: tuple[Tensor, Tensor]):
        self.test, self.probe = test, probe
        self.trained = 0  # epochs trained through this callback (0 when every cell came from the cache)

    def __call__(self, record: dict, result) -> None:
        from .. import analysis  # lazily, as in evaluate: training itself does not need it

        self.trained += 1
        img, txt, c2i = self.test
        S = result.similarity(img, txt)
        record["test"] = split_metrics(S, c2i.to(S.device))
        table = analysis.cocos_table(result.similarity(*self.probe))
        record["probe_cocos"] = {
            f"{row.loss}_{row.direction}": {k: float(getattr(row, k)) for k in ("C_q", "C_0", "W_neg", "W_pos")}
            for row in table.itertuples()
        }
        rsums = [r.get("rsum", float("-inf")) for r in result.history]
        best = rsums.index(max(rsums))
        chosen = result.history[best]
        record["sel"] = {"epoch": best + 1, **chosen["test"], "cocos": chosen["probe_cocos"]}


# --------------------------------------------------------------------------- training the cells


@contextmanager
def cpu_threads(n: int):
    """Run torch with `n` intra-op threads inside the block (restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _callback(spec: ShowdownSpec, data: ShowdownData) -> ShowdownMetrics:
    """The callback of a cell of `spec`: its test split, and the probe batch capped at the training images."""
    return ShowdownMetrics(data.test, probe_batch(data.train, min(spec.probe, data.train[0].shape[0])))


def _threads(device: torch.device):
    """One intra-op thread on a CPU (see :func:`train_cells`), torch's own number on a GPU."""
    return cpu_threads(1 if device.type == "cpu" else torch.get_num_threads())


def train_cells(spec: ShowdownSpec, contestants: list[dict], out: Path,
                progress: bool = False) -> tuple[GridResult, ShowdownData, ShowdownMetrics, float]:
    """Train (or read from the cache under `out`) every contestant x seed of `spec` through ``grid``.

    Returns the grid's result, the data, the callback (``trained``: epochs trained now) and the
    wall time in seconds. On a CPU torch runs single-threaded here: the heads' matmuls are tiny
    and thread synchronisation dominated (measured 10-50x slower with 2 threads on a shared 2-core
    machine).
    """
    data = load_data(spec)
    device = default_device(spec.device)
    callback = _callback(spec, data)
    t0 = time.perf_counter()
    settings = spec.settings().replace(device=device, callbacks=[callback])
    # On a GPU a heads-on-features step is launch overhead: the runs train together (train.fit_many), each the
    # run it is alone. On the CPU one by one is faster (docs/benchmarks.md, "Many runs at once").
    batched = device.type == "cuda" and spec.setting == "features"
    with _threads(device):
        result = grid(contestants, seeds=spec.seeds, train=data.train, val=data.val, setting=spec.setting, out=out,
                      data_id=data.data_id, progress=progress, settings=settings, batched=batched, **spec.model())
    return result, data, callback, time.perf_counter() - t0


def retrain(spec: ShowdownSpec, loss: str = "triplet_hardest", seed: int = 0, data: ShowdownData | None = None,
            loss_kwargs: dict | None = None, settings: dict | None = None):
    """One cell of `spec` trained from scratch, with the showdown's callback (a ``FitResult``); `loss_kwargs`
    change the loss's parameters (the showdown's cells use each loss's defaults), `settings` TrainSettings fields
    a spec does not hold (the optimizer experiment's optimizer and weight decay)."""
    from .grid_search import trainer

    data = data or load_data(spec)
    device = default_device(spec.device)
    callback = _callback(spec, data)
    with _threads(device):
        return trainer(spec.setting)(*data.train, loss=loss, loss_kwargs=loss_kwargs, val=data.val, **spec.model(),
                                     settings=spec.settings().replace(seed=seed, callbacks=[callback], device=device,
                                                                     **(settings or {})))


# --------------------------------------------------------------------------- a finished race


@dataclass
class Showdown:
    """A finished experiment's table (the showdown's: one row per configuration and seed), and how it was made.

    ``reused``: read from a stored table or a shipped record rather than trained now; ``record``: that record.
    """

    runs: pd.DataFrame
    meta: dict
    out: Path
    reused: bool
    record: R.Record | None = None  # the shipped record it was read from (vlr_lib.experiments.record)


def from_cells(out: Path, keys) -> pd.DataFrame | None:
    """The runs table of the cells `keys` under ``out/cells``, rebuilt from the cells themselves (the source of
    truth: runs.csv is a copy for the user to read); None when `keys` is not a list of cell keys or a cell is
    missing (deleted since: the caller trains it again)."""
    if not isinstance(keys, list) or not all(isinstance(k, str) and CELL_KEY.fullmatch(k) for k in keys):
        return None
    if not all((Path(out) / "cells" / f"{k}.json").is_file() for k in keys):
        return None
    return R.cell_table(R.grid_cells(out, keys))


def opened(rec: R.Record) -> Showdown:
    """A race read from a shipped record of its cells (the showdown's, or another experiment's of the same form)."""
    return Showdown(R.cell_table(R.cells_of(rec.tables)), rec.manifest["meta"], rec.path, reused=True, record=rec)


def hardware(device: torch.device) -> str:
    """'2-core CPU (x86_64), no GPU, torch 2.x' or the GPU's name."""
    cpu = f"{os.cpu_count()}-core CPU ({platform.machine()})"
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} GPU, {cpu}, torch {torch.__version__}"
    gpu = "no GPU" if not torch.cuda.is_available() else "GPU present but unused"
    return f"{cpu}, {gpu}, torch {torch.__version__}"


def race_meta(spec: ShowdownSpec, result: GridResult, data: ShowdownData, callback: ShowdownMetrics, wall: float,
              command: str) -> dict:
    """What a finished race of `spec` stores beside its cells: settings, command, data, hardware, date, cell keys."""
    device = default_device(spec.device)
    return {
        "spec": spec.key(),
        "command": command,
        "setting": SETTING_LABELS[spec.setting],
        "data": data.description,
        "data_id": data.data_id,
        "n_runs": len(result.runs),
        "epochs_trained_now": callback.trained,
        "chance_rsum_test": chance_rsum(data.test[2]),
        "n_test_images": int(data.test[0].shape[0]),
        "device": str(device),
        "hardware": hardware(device),
        "wall_seconds": round(wall, 1),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "versions": {"vlr_lib": __version__, "torch": torch.__version__, "python": platform.python_version()},
        "keys": list(result.runs["key"]),
    }
