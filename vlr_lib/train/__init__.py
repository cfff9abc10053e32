"""One trainer for every loss of the workbook in three settings.

The three settings (:data:`SETTINGS`, ``vlr_lib.train.inputs``) say what learns:

- :func:`fit` -- "features": projection heads on frozen features (``vlr_lib.train.fit_features``);
  :func:`fit_many` -- several such runs trained together, their heads stacked (``vlr_lib.train.batched``; a GPU's);
- :func:`fit_vsepp` -- "vsepp": a head on frozen image features + a GRU text encoder from
  scratch, the VSE++ setting (``vlr_lib.train.vsepp``);
- :func:`fit_end_to_end` -- "e2e": tiny CNN + text encoder from scratch on the shapes data;
- :func:`shapes_features` / :func:`shapes_inputs` -- the shapes data's inputs for each setting
  (pretrained frozen image features by default), :func:`caption_ids` -- captions as token ids;
- :class:`TrainSettings` -- the schedule and plumbing both share (``vlr_lib.train.settings``);
- :func:`trainer` -- a setting's fit function (what the command lines and the grid call);
- :func:`build_heads` (the heads ``fit`` starts from), :func:`evaluate` (one split's metrics);
- :class:`TrainingDivergedError`, :class:`FitResult`.

What to train -- the grid, the showdown, the tuned comparison, the lessons and the shipped records --
is ``vlr_lib.experiments``, which sits above this package and calls it.

Submodules: settings (TrainSettings), device (which device), objective (loss names
-> callables, loss schedules), sampling (batches), engine (the loop and the callback
contract), evaluate (per-epoch metrics), checkpoint (atomic save/load), distributed
(process group, gather with gradients), launch (what the fit functions share), inputs,
fit_features, batched, vsepp, end_to_end.
"""
from .device import default_device
from .distributed import broadcast_object, rank_and_world
from .end_to_end import fit_encoders, fit_end_to_end, shapes_tensors
from .engine import FitResult, TrainingDivergedError
from .evaluate import evaluate, probe_indices, split_metrics
from .fit_features import Triple, build_heads, fit
from .batched import fit_many
from .objective import Objective, build_objective, make_objective
from .inputs import SETTING_LABELS, SETTINGS, caption_ids, check_setting, shapes_features, shapes_inputs, with_caption_ids
from .settings import TrainSettings, preset, settings_for
from .vsepp import fit_vsepp


def trainer(setting: str):
    """The training function of a setting on (train triple, loss, val=, settings=, model arguments):
    ``fit`` (features), ``fit_vsepp`` (vsepp) or ``fit_encoders`` (e2e)."""
    return {"features": fit, "vsepp": fit_vsepp, "e2e": fit_encoders}[check_setting(setting)]


__all__ = [
    "fit",
    "fit_many",
    "build_heads",
    "evaluate",
    "probe_indices",
    "fit_end_to_end",
    "fit_vsepp",
    "trainer",
    "SETTINGS",
    "shapes_inputs",
    "caption_ids",
    "FitResult",
    "TrainingDivergedError",
    "shapes_tensors",
    "shapes_features",
    "TrainSettings",
    "Triple",
    "make_objective",
    "build_objective",
    "Objective",
    "check_setting",
    "SETTING_LABELS",
    "with_caption_ids",
    "split_metrics",
    "preset",
    "settings_for",
    "default_device",
    "broadcast_object",
    "rank_and_world",
]
