"""Results: tidy tables, mean ± std over seeds, the papers' table layouts, the written reading, Markdown.

Everything here is a pure function of a runs table -- one row per (configuration, seed), as
``vlr_lib.experiments.grid`` writes it (``GridResult.runs``, ``runs.csv``) and the showdown extends it
(``sel_*`` / ``test_*`` columns, ``vlr_lib.experiments.showdown``) -- or of per-epoch histories
(``FitResult.history``). The grid, the showdown, the command lines, notebooks 09-12 and the
figures of ``vlr_lib.viz.showdown`` / ``vlr_lib.viz.training`` all read their numbers here. Each concern has
its own module, and callers import each name from the module that holds it (``from vlr_lib.report.summary import
summarize``); this package re-exports nothing:

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
