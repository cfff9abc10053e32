"""One trainer for every loss of the workbook, a grid runner, and the end-to-end shapes mode.

- :func:`fit` -- projection heads on fixed features (``vlr_lib.train.fit_features``);
- :func:`fit_end_to_end` -- tiny CNN + text encoder from scratch on the shapes data;
- :class:`TrainSettings` -- the schedule and plumbing both share (``vlr_lib.train.settings``);
- :func:`grid` / :func:`goal_grid` -- losses x hyperparameters x seeds, cached per cell;
- :func:`build_heads` (the heads ``fit`` starts from), :func:`evaluate` (one split's metrics);
- :class:`TrainingDivergedError`, :class:`FitResult`, :func:`chance_rsum`;
- :mod:`showdown` -- the loss showdown of notebook 10 (:class:`ShowdownSpec`,
  :func:`spec_for`, :class:`ShowdownMetrics`, ``showdown.run``; the command line
  is ``data_scripts/run_showdown.py``).

Submodules: settings (TrainSettings), device (which device), objective (loss names
-> callables), sampling (batches), engine (the loop and the callback contract),
evaluate (per-epoch metrics), checkpoint (atomic save/load), distributed (process
group, gather with gradients), fit_features, end_to_end, grid_search, showdown.
"""
from .end_to_end import chance_rsum, fit_end_to_end, shapes_features, shapes_tensors
from .engine import FitResult, TrainingDivergedError
from .evaluate import evaluate, probe_indices
from .fit_features import Triple, build_heads, fit
from .grid_search import GridResult, expand_configs, goal_grid, grid
from .objective import ROW_WISE, Objective, loss_names, make_objective
from .settings import TrainSettings
from . import showdown
from .showdown import Showdown, ShowdownData, ShowdownMetrics, ShowdownSpec, spec_for

__all__ = [
    "fit",
    "build_heads",
    "evaluate",
    "probe_indices",
    "fit_end_to_end",
    "grid",
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
    "loss_names",
    "Objective",
    "ROW_WISE",
    "showdown",
    "Showdown",
    "ShowdownData",
    "ShowdownMetrics",
    "ShowdownSpec",
    "spec_for",
]
