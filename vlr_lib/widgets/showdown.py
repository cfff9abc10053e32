"""Explorers of notebook 10: the loss showdown.

Each explorer returns the box of ``widgets._core.explorer``
(``.controls``, ``.figure``, ``.redraw``); callbacks only call one builder of
``vlr_lib.viz.showdown`` on tables summarised once up front (``vlr_lib.report``).
"""
from __future__ import annotations

import ipywidgets as W
import pandas as pd

from ..report.labels import COCOS_STATS, GROUPS, METRIC_LABELS, TABLE1_COLUMNS
from ..report.summary import cocos_summary, summarize
from ..viz import showdown
from ._core import BookView, Explorer, explorer

CHECKPOINTS = (("best validation epoch", "sel_"), ("last epoch", "test_"))
GOAL_METRICS = (("R@1 both ways (Tables 3-5)", "r1"),) + tuple((METRIC_LABELS[m], m)
                                                                for m in TABLE1_COLUMNS)


def _summaries(runs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Summaries at the selected and at the last epoch (whichever columns the runs have)."""
    out = {}
    for _, prefix in CHECKPOINTS:
        if f"{prefix}rsum" in runs.columns:
            out[prefix] = summarize(runs, prefix=prefix)
    if not out:
        raise ValueError("runs has neither sel_* nor test_* metrics; was it made by data_scripts/run_showdown.py?")
    return out


def _checkpoint_control(summaries: dict) -> W.ToggleButtons:
    options = [(label, p) for label, p in CHECKPOINTS if p in summaries]
    return W.ToggleButtons(options=options, value=options[0][1], description="checkpoint")


def _views(summaries: dict, other: str, choices: list[tuple[str, object]]) -> list[BookView]:
    """The book's drop-down of a showdown explorer: each of `other`'s (label, value) `choices` at each
    checkpoint the runs have, the metric on the slider (its options: the prose's first control)."""
    return [BookView(f"{label}, {where}", {other: value, "checkpoint": p})
            for label, value in choices for where, p in CHECKPOINTS if p in summaries]


def showdown_explorer(runs: pd.DataFrame, chance: float | None = None, metric: str = "rsum",
                      group: str = "all") -> Explorer:
    """Mean ± std per loss on one metric: choose the metric, the group of losses and the checkpoint.

    `chance` (the chance rsum of the test split) is drawn when the metric is rsum.
    """
    summaries = _summaries(runs)

    def draw(metric: str, group: str, checkpoint: str):
        return showdown.metric_errorbars(summaries[checkpoint], metric, group, chance if metric == "rsum" else None,
                                         checkpoint={p: label for label, p in CHECKPOINTS}[checkpoint])

    controls = {
        "metric": W.Dropdown(options=[(METRIC_LABELS[m], m) for m in TABLE1_COLUMNS], value=metric,
                             description="metric"),
        "group": W.ToggleButtons(options=list(GROUPS), value=group, description="losses"),
        "checkpoint": _checkpoint_control(summaries),
    }
    views = _views(summaries, "group", [(f"{g} losses", g) for g in GROUPS])
    return explorer(controls, draw, rows=[["metric", "checkpoint"], ["group"]], name="showdown", book_views=views)


def goal_explorer(runs: pd.DataFrame, metric: str = "r1", color: str = "mean") -> Explorer:
    """The GOAL 3 x 5 grid as heatmaps: choose the metric, colour by mean or by Δ to (T^con, P^con)."""
    summaries = _summaries(runs)

    def draw(metric: str, color: str, checkpoint: str):
        return showdown.goal_heatmaps(summaries[checkpoint], metric, color)

    controls = {
        "metric": W.Dropdown(options=list(GOAL_METRICS), value=metric, description="metric"),
        "color": W.ToggleButtons(options=[("mean", "mean"), ("Δ vs (con, con)", "delta")], value=color,
                                 description="colour"),
        "checkpoint": _checkpoint_control(summaries),
    }
    views = _views(summaries, "color", [(f"colour: {label}", c) for label, c in controls["color"].options])
    return explorer(controls, draw, rows=[["metric", "color"], ["checkpoint"]], name="showdown-goal",
                    book_views=views)


def cocos_explorer(runs: pd.DataFrame, stat: str = "C_q") -> Explorer:
    """COCOS of every rule at the selected epoch, one statistic at a time (Bleeker & de Rijke Tables 2-4)."""
    tables = {s: cocos_summary(runs, s) for s in COCOS_STATS}

    def draw(stat: str):
        return showdown.cocos_heatmap(tables[stat], stat)

    labels = {"C_q": "C^q: contributing candidates per query", "C_0": "C^0: queries without gradient",
              "W_neg": "W^{qv-}: NT-Xent weight on negatives", "W_pos": "W^{qv+}: NT-Xent weight off the positive"}
    controls = {"stat": W.Dropdown(options=[(labels[s], s) for s in COCOS_STATS], value=stat,
                                   description="statistic", style={"description_width": "initial"})}
    return explorer(controls, draw, name="showdown-cocos")
