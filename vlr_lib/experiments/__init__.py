"""The experiments the notebooks and command lines run, above the trainer (docs/architecture.md).

``vlr_lib.train`` trains one run; this package decides which runs to train, stores them and reads
them back:

- :func:`grid` / :func:`goal_grid` / :func:`expand_configs` -- losses x hyperparameters x seeds,
  every (configuration, seed) cell cached on disk and resumed (``grid_search``; notebook 11,
  ``python -m vlr_lib grid``);
- :mod:`cells` -- the cell runner the showdown, the tuned comparison and the lessons share: the spec a race of
  cells trains under (:class:`ShowdownSpec`, :func:`spec_for`), its data, the callback that measures the test
  split and COCOS (:class:`ShowdownMetrics`), ``cells.train_cells`` and ``cells.retrain``;
- :mod:`showdown` -- the loss showdown of notebook 10 (its contestants, ``showdown.run``;
  ``python -m vlr_lib showdown``);
- :mod:`tuned` -- the tuned comparison of notebook 11 (``python -m vlr_lib tuned``);
- :mod:`batch_size` -- notebook 03's batch-size experiment (NT-Xent, SigLIP, CLIP's learned temperature at
  batch sizes 32, 128, 512; ``python -m vlr_lib record --only 03-batch``), :mod:`difficulty` -- its difficulty
  experiment (NT-Xent and SigLIP at notebook 12's difficulties 0, 0.5, 1; ``--only 03-difficulty``) and
  :mod:`paired` -- how both read their declared families;
- :mod:`lessons` -- the controlled experiments of notebook 12 (``python -m vlr_lib lessons``);
- :mod:`record` -- the full-size runs that ship in ``vlr_lib/recorded/``: read, checked by hash,
  written (``python -m vlr_lib record``), and :mod:`recheck` -- each record's checked run re-trained;
- :mod:`protocol` -- every recorded experiment, one entry each (its record, chapter, ``make record`` step,
  tolerance, checked run), and ``protocol.check``, the one call a chapter checks its record with.
"""
from . import batch_size, cells, lessons, protocol, recheck, record, showdown, tuned
from .grid_search import GridResult, expand_configs, goal_grid, grid
from .cells import Showdown, ShowdownData, ShowdownMetrics, ShowdownSpec, spec_for

__all__ = [
    "grid",
    "goal_grid",
    "expand_configs",
    "GridResult",
    "cells",
    "showdown",
    "tuned",
    "batch_size",
    "lessons",
    "record",
    "recheck",
    "protocol",
    "Showdown",
    "ShowdownData",
    "ShowdownMetrics",
    "ShowdownSpec",
    "spec_for",
]
