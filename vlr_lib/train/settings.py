"""How a run trains, besides its loss, data and model: one dataclass shared by ``fit`` and ``fit_end_to_end``.

:class:`TrainSettings` holds the schedule (epochs, batch size, learning rate and its decay,
sampling, COCOS probe size, seed) and the run's plumbing (device, callbacks, checkpoints,
progress bars). It is validated once, when it is made; the checks that need the data
(a batch no larger than the split, divisible by the number of processes) run in
:meth:`TrainSettings.resolve`. ``fit(..., epochs=3)`` and ``fit(..., settings=s)`` are the
same thing: keyword arguments override fields of the settings.

The grid (``vlr_lib.experiments.grid``), the command lines and the showdown build their runs from
it; :data:`EXPERIMENT_FIELDS` are the fields that change a result (they key grid cells and
checkpoints), :data:`RUN_FIELDS` the ones that do not.

Every default the library trains with is written here, once: :data:`RUN` (one run's defaults:
``fit``, ``fit_end_to_end``, the ``train`` and ``grid`` commands, read through :func:`run_defaults`)
and :data:`PRESETS` / :data:`FAST` (the experiments' recipes: the showdown and the lessons, read
through :func:`preset`). Each names only what differs from TrainSettings' own defaults and :data:`MODEL`.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .._checks import check_int, check_nonnegative, check_positive
from .device import parse_device
from .sampling import SAMPLINGS

EXPERIMENT_FIELDS = ("epochs", "batch_size", "lr", "lr_decay_epoch", "sampling", "probe_batch", "seed", "grad_clip",
                     "optimizer_at_switch", "optimizer", "weight_decay")
#: What a loss schedule's switch does to Adam: a fresh state for the new loss, or the old loss's state carried over.
OPTIMIZER_AT_SWITCH = ("fresh", "carry")
#: The optimizers: Adam (VSE++, Faghri et al.) and AdamW (decoupled weight decay, Loshchilov & Hutter, "Decoupled
#: Weight Decay Regularization", ICLR 2019, Algorithm 2; VSE∞, Chen et al. 2021, trains with it at 1e-4).
OPTIMIZERS = ("adam", "adamw")
#: Experiment fields added after records were made: left out of :meth:`TrainSettings.experiment` at these values, so
#: every key made before them (grid cells, checkpoints, records) stays byte-identical.
LATE_DEFAULTS = {"optimizer": "adam", "weight_decay": 0.0}
RUN_FIELDS = ("device", "callbacks", "checkpoint_dir", "resume", "progress")
#: The schedule fields a preset sets (the rest of a preset is the model's sizes, :data:`MODEL`).
SCHEDULE_FIELDS = ("epochs", "batch_size", "lr", "lr_decay_epoch", "sampling", "grad_clip")
#: The model sizes every preset starts from: the joint space (each preset names its own), the VSE++ setting's word
#: embedding and GRU sizes (None: the model's default) and the count that admits a word into the vocabulary.
MODEL = {"word_dim": None, "hidden": None, "min_count": 1}
#: One run's defaults per setting (the vsepp setting's are its experiment preset's, :func:`run_defaults`).
#: e2e learns from scratch on a CPU: small batches, a larger lr, 5x cheaper epochs ("images" sampling).
RUN = {"features": {"dim": 512},
       "e2e": {"epochs": 20, "batch_size": 32, "lr": 2e-3, "sampling": "images", "dim": 64}}
#: The experiments' full-size recipes per (data set, setting), chosen on validation so that the runs converge
#: (docs/results.md, run 7; ``vlr_lib.experiments.cells.spec_for`` says why each number).
PRESETS = {
    ("shapes", "features"): {"epochs": 20, "lr": 1e-3, "lr_decay_epoch": 10, "dim": 256},
    ("shapes", "vsepp"): {"epochs": 20, "lr": 2e-3, "lr_decay_epoch": 10, "dim": 256, "word_dim": 32, "hidden": 64,
                          "grad_clip": 2.0},
    ("shapes", "e2e"): {**RUN["e2e"], "epochs": 40},
    ("flickr30k", "features"): {"epochs": 15, "dim": 512},
    ("flickr30k", "vsepp"): {"epochs": 15, "dim": 1024, "word_dim": 300, "hidden": 1024, "min_count": 4},  # VSE++'s
}
#: Fast mode (the tests and CI) over a data set's full-size preset, for every setting.
FAST = {"shapes": {"epochs": 4, "batch_size": 50, "lr": 3e-3, "lr_decay_epoch": None, "sampling": "images", "dim": 64},
        "flickr30k": {"epochs": 2}}


@dataclass(frozen=True)
class TrainSettings:
    """The schedule and plumbing of one training run (defaults: heads on features, the VSE++ recipe).

    - ``epochs``; ``batch_size`` captions (with their images) per step, >= 2; Adam at ``lr``,
      x0.1 from epoch ``lr_decay_epoch`` (0-based; None: halfway, as VSE++ / Li et al.);
    - ``grad_clip``: clip the gradient's global L2 norm to this value before each step (None: off;
      VSE++ and VSE∞ clip at 2.0);
    - ``optimizer``: "adam" (the default) or "adamw"; ``weight_decay`` (>= 0, default 0): Adam's L2 term
      added to the gradient, AdamW's decoupled decay (each step multiplies the weights by 1 - lr x weight_decay);
      AdamW at weight_decay 0 is Adam, step for step;
    - ``optimizer_at_switch``: at a loss schedule's switch ("warmup:..."), "fresh" (the default) gives
      the new loss a new Adam, "carry" keeps the state the first loss built. Adam's second moment
      (beta2 = 0.999: a memory of ~1,000 steps) remembers the first loss's gradient scale; Triplet
      (all)'s is ~40x Triplet-SH's in a first epoch, so carried over it shrinks Triplet-SH's steps for the rest of a
      short run (docs/results.md, run 7);
    - ``sampling``: "captions" (an epoch visits every caption, VSE++) or "images" (one random
      caption per image);
    - ``probe_batch``: distinct training images of the fixed COCOS probe (None: the batch
      size; 0: no probe); ``seed``: heads' initialisation and batch order;
    - ``device`` (None: cuda when available), ``callbacks`` (``cb(record, result)`` after every
      epoch), ``checkpoint_dir`` / ``resume`` (save every epoch, continue from it),
      ``progress`` (bars).
    """

    epochs: int = 10
    batch_size: int = 128
    lr: float = 2e-4
    lr_decay_epoch: int | None = None
    sampling: str = "captions"
    probe_batch: int | None = None
    seed: int = 0
    grad_clip: float | None = None
    optimizer_at_switch: str = "fresh"
    optimizer: str = "adam"
    weight_decay: float = 0.0
    device: str | torch.device | None = None
    callbacks: Callable | Sequence[Callable] | None = ()
    checkpoint_dir: str | os.PathLike | None = None
    resume: bool = True
    progress: bool = True

    def __post_init__(self) -> None:
        check_int("epochs", self.epochs, 1)
        check_int("batch_size", self.batch_size, 2)
        check_positive("lr", self.lr)
        if self.lr_decay_epoch is not None:
            check_int("lr_decay_epoch", self.lr_decay_epoch, 0)
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}, got {self.sampling!r}")
        if self.probe_batch is not None and check_int("probe_batch", self.probe_batch, 0) == 1:
            raise ValueError("probe_batch must be 0 (off) or >= 2 (COCOS needs negatives)")
        check_int("seed", self.seed, 0)
        if self.grad_clip is not None:
            check_positive("grad_clip", self.grad_clip)
        if self.optimizer_at_switch not in OPTIMIZER_AT_SWITCH:
            raise ValueError(f"optimizer_at_switch must be one of {OPTIMIZER_AT_SWITCH}, got {self.optimizer_at_switch!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        object.__setattr__(self, "weight_decay", check_nonnegative("weight_decay", self.weight_decay))
        if self.device is not None:
            object.__setattr__(self, "device", parse_device(self.device))
        object.__setattr__(self, "callbacks", _callbacks(self.callbacks))
        if self.checkpoint_dir is not None:
            object.__setattr__(self, "checkpoint_dir", os.fspath(self.checkpoint_dir))
        for name in ("resume", "progress"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")

    @classmethod
    def end_to_end(cls, **overrides) -> "TrainSettings":
        """The defaults of ``fit_end_to_end`` (``RUN["e2e"]``), with `overrides`."""
        return cls(**{**schedule(run_defaults("shapes", "e2e")), **overrides})

    def replace(self, **changes) -> "TrainSettings":
        """A copy with `changes` applied (and validated); an unknown name is a TypeError naming it."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {unknown}; TrainSettings has {fields()}")
        return dataclasses.replace(self, **changes) if changes else self

    def experiment(self) -> dict:
        """The fields that change a result (:data:`EXPERIMENT_FIELDS`), as a JSON-able dict; a field of
        :data:`LATE_DEFAULTS` at its default is left out (the keys made before it existed stay as they were)."""
        return {k: getattr(self, k) for k in EXPERIMENT_FIELDS
                if k not in LATE_DEFAULTS or getattr(self, k) != LATE_DEFAULTS[k]}

    def resolve(self, n_images: int, world: int = 1) -> "TrainSettings":
        """The settings for a training split of `n_images` images on `world` processes.

        Checks 2 <= batch_size <= n_images (every query needs negatives), divisibility by
        `world`, probe_batch <= n_images; fills lr_decay_epoch (halfway) and probe_batch
        (min(batch_size, n_images)).
        """
        if self.batch_size > n_images:
            raise ValueError(f"batch_size must be at most the number of training images ({n_images}), "
                             f"got {self.batch_size}")
        if self.batch_size % world:
            raise ValueError(f"batch_size ({self.batch_size}) must be divisible by the number of processes ({world})")
        probe = self.probe_batch
        probe = min(self.batch_size, n_images) if probe is None else check_int("probe_batch", probe, 0, n_images)
        decay = max(1, self.epochs // 2) if self.lr_decay_epoch is None else self.lr_decay_epoch
        return dataclasses.replace(self, probe_batch=probe, lr_decay_epoch=decay)


def _filled(values: dict) -> dict:
    """`values` over TrainSettings' schedule defaults and :data:`MODEL`: every field a preset has."""
    defaults = {f.name: f.default for f in dataclasses.fields(TrainSettings) if f.name in SCHEDULE_FIELDS}
    return {**defaults, **MODEL, **values}


def preset(data: str, setting: str, fast: bool = False) -> dict:
    """The experiments' schedule and model sizes for `data` and `setting` (:data:`PRESETS`), :data:`FAST` over them
    in fast mode: a dict of :data:`SCHEDULE_FIELDS` and :data:`MODEL`'s fields with "dim"."""
    if (data, setting) not in PRESETS:
        raise ValueError(f"no preset for data {data!r} in setting {setting!r}; there are {sorted(PRESETS)}")
    return _filled({**PRESETS[data, setting], **(FAST[data] if fast else {})})


def run_defaults(data: str, setting: str) -> dict:
    """One run's schedule and model sizes (:data:`RUN`): the vsepp setting takes its full-size preset, with the lr
    decayed halfway (the preset's epoch 10 of 20) so that a run of other length decays halfway too."""
    if setting == "vsepp":
        return {**preset(data, setting), "lr_decay_epoch": None}
    if setting not in RUN:
        raise ValueError(f"setting must be one of {(*RUN, 'vsepp')}, got {setting!r}")
    return _filled(RUN[setting])


def schedule(values: dict) -> dict:
    """The TrainSettings fields of a preset (:data:`SCHEDULE_FIELDS`)."""
    return {k: values[k] for k in SCHEDULE_FIELDS}


def fields() -> tuple[str, ...]:
    """Every field name of :class:`TrainSettings`."""
    return tuple(f.name for f in dataclasses.fields(TrainSettings))


def _callbacks(callbacks) -> tuple[Callable, ...]:
    if callbacks is None:
        return ()
    if callable(callbacks):
        return (callbacks,)
    out = tuple(callbacks)
    bad = [c for c in out if not callable(c)]
    if bad:
        raise TypeError(f"callbacks must be callables cb(record, result), got {bad[0]!r}")
    return out


def settings_for(settings: TrainSettings | None, overrides: dict, end_to_end: bool = False) -> TrainSettings:
    """`settings` (or the mode's defaults) with the keyword `overrides` of ``fit`` / ``fit_end_to_end``."""
    if settings is not None and not isinstance(settings, TrainSettings):
        raise TypeError(f"settings must be a TrainSettings, got {type(settings).__name__}")
    base = settings or (TrainSettings.end_to_end() if end_to_end else TrainSettings())
    return base.replace(**overrides)
