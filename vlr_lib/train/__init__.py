"""One trainer for every loss of the workbook in three settings, a grid runner, the showdown and the lessons.

The three settings (:data:`SETTINGS`, ``vlr_lib.train.inputs``) say what learns:

- :func:`fit` -- "features": projection heads on frozen features (``vlr_lib.train.fit_features``);
- :func:`fit_vsepp` -- "vsepp": a head on frozen image features + a GRU text encoder from
  scratch, the VSE++ setting (``vlr_lib.train.vsepp``);
- :func:`fit_end_to_end` -- "e2e": tiny CNN + text encoder from scratch on the shapes data;
- :func:`shapes_features` / :func:`shapes_inputs` -- the shapes data's inputs for each setting
  (pretrained frozen image features by default), :func:`caption_ids` -- captions as token ids;
- :class:`TrainSettings` -- the schedule and plumbing both share (``vlr_lib.train.settings``);
- :func:`grid` / :func:`goal_grid` -- losses x hyperparameters x seeds, cached per cell;
- :func:`build_heads` (the heads ``fit`` starts from), :func:`evaluate` (one split's metrics);
- :class:`TrainingDivergedError`, :class:`FitResult`, :func:`chance_rsum`;
- :mod:`showdown` -- the loss showdown of notebook 10 (:class:`ShowdownSpec`,
  :func:`spec_for`, :class:`ShowdownMetrics`, ``showdown.run``; the command line
  is ``python -m vlr_lib showdown``);
- :mod:`lessons` -- the controlled experiments of notebook 12 ("when do the papers' lessons hold?").

Submodules: settings (TrainSettings), device (which device), objective (loss names
-> callables, loss schedules), sampling (batches), engine (the loop and the callback
contract), evaluate (per-epoch metrics), checkpoint (atomic save/load), distributed
(process group, gather with gradients), launch (what the fit functions share), inputs,
fit_features, vsepp, end_to_end, grid_search, showdown, lessons.
"""
from ..metrics import chance_rsum
from .end_to_end import fit_end_to_end, shapes_tensors
from .engine import FitResult, TrainingDivergedError
from .evaluate import evaluate, probe_indices
from .fit_features import Triple, build_heads, fit
from .grid_search import GridResult, expand_configs, goal_grid, grid, trainer
from .objective import ROW_WISE, Objective, build_objective, loss_names, make_objective
from .inputs import SETTINGS, caption_ids, shapes_features, shapes_inputs
from .settings import TrainSettings
from .vsepp import fit_vsepp
from . import lessons, showdown
from .showdown import Showdown, ShowdownData, ShowdownMetrics, ShowdownSpec, spec_for

__all__ = [
    "fit",
    "build_heads",
    "evaluate",
    "probe_indices",
    "fit_end_to_end",
    "fit_vsepp",
    "SETTINGS",
    "shapes_inputs",
    "caption_ids",
    "grid",
    "trainer",
    "goal_grid",
    "expand_configs",
    "GridResult",
    "FitResult",
    "TrainingDivergedError",
    "chance_rsum",
    "shapes_tensors",
    "shapes_features",
    "TrainSettings",
    "Triple",
    "make_objective",
    "build_objective",
    "loss_names",
    "Objective",
    "ROW_WISE",
    "showdown",
    "lessons",
    "Showdown",
    "ShowdownData",
    "ShowdownMetrics",
    "ShowdownSpec",
    "spec_for",
]
