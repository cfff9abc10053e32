"""Results: tidy tables, mean ± std over seeds, the papers' table layouts, the written reading, Markdown.

Everything here is a pure function of a runs table -- one row per (configuration, seed), as
``vlr_lib.experiments.grid`` writes it (``GridResult.runs``, ``runs.csv``) and the showdown extends it
(``sel_*`` / ``test_*`` columns, ``vlr_lib.experiments.showdown``) -- or of per-epoch histories
(``FitResult.history``). The grid, the showdown, the command lines, notebooks 09-12 and the
figures of ``vlr_lib.viz.showdown`` / ``vlr_lib.viz.training`` all read their numbers here,
as ``report.<name>``; each concern has its own module:

- :mod:`~vlr_lib.report.labels` -- metric labels and column sets, a configuration's label and
  hyperparameters, "mean ± std" (:func:`mean_std`);
- :mod:`~vlr_lib.report.summary` -- :func:`summarize`, mean and std over seeds per configuration
  (the one summary), :func:`summary_table` as text, :func:`cocos_summary` / :func:`cocos_own_rule`;
- :mod:`~vlr_lib.report.layouts` -- :func:`table1` (Bleeker & de Rijke's Table 1 plus PR-AUC),
  :func:`goal_matrix` / :func:`goal_table` (Xuan & Chen's 3 x 5 GOAL grid);
- :mod:`~vlr_lib.report.readings` -- :func:`separations`, :func:`claims`, :func:`ranking`,
  :func:`reading`: which differences the seeds tell (paired, Holm-corrected: ``vlr_lib.stats``), and the
  prose built from them;
- :mod:`~vlr_lib.report.sweeps` -- histories and hyperparameter sweeps as tables;
- :mod:`~vlr_lib.report.lessons` -- notebook 12's paired differences and their reading;
- :mod:`~vlr_lib.report.markdown` -- :func:`to_markdown`, :func:`markdown_block` for docs/results.md.

The numbers a figure prints in its labels and titles (``fmt``, ``readout``) are the figures' own:
``vlr_lib.viz.readout``.
"""
from __future__ import annotations

from .labels import (COCOS_RULES, COCOS_STATS, FRACTIONS, GROUPS, METRIC_LABELS, SETTING_COLUMNS, SETUP_COLUMNS,
                     SUMMARY_METRICS, TABLE1_COLUMNS, check_metric, config_label, flatten_record, hyperparameters,
                     mean_std, metric_label, settings_json, table1_name)
from .layouts import goal_matrix, goal_table, table1
from .lessons import (LESSON_DELTAS, lesson_matrix, lesson_part, lesson_reading, lesson_table, lessons_markdown,
                      role_matrix, seed_differences)
from .markdown import META_KEYS, META_SPEC_KEYS, last_epoch_share, markdown_block, to_markdown, training_line
from .readings import GOAL_PAIR_CLAIMS, PAPER_CLAIMS, claims, group, interval_text, per_seed, ranking, reading, separations
from .summary import SUMMARY_COLUMNS, check_summary, cocos_own_rule, cocos_summary, summarize, summary_table
from .sweeps import (history_frame, history_values, is_close, loss_rows, sweep_grid, sweep_losses, sweep_slice,
                     sweep_values)

__all__ = [
    "COCOS_RULES", "COCOS_STATS", "FRACTIONS", "GROUPS", "METRIC_LABELS", "SETTING_COLUMNS", "SETUP_COLUMNS",
    "SUMMARY_METRICS", "TABLE1_COLUMNS", "check_metric", "config_label", "flatten_record", "hyperparameters",
    "mean_std", "metric_label", "settings_json", "table1_name",
    "goal_matrix", "goal_table", "table1",
    "LESSON_DELTAS", "lesson_matrix", "lesson_part", "lesson_reading", "lesson_table", "lessons_markdown",
    "role_matrix", "seed_differences",
    "META_KEYS", "META_SPEC_KEYS", "last_epoch_share", "markdown_block", "to_markdown", "training_line",
    "GOAL_PAIR_CLAIMS", "PAPER_CLAIMS", "claims", "group", "interval_text", "per_seed", "ranking", "reading",
    "separations",
    "SUMMARY_COLUMNS", "check_summary", "cocos_own_rule", "cocos_summary", "summarize", "summary_table",
    "history_frame", "history_values", "is_close", "loss_rows", "sweep_grid", "sweep_losses", "sweep_slice",
    "sweep_values",
]
