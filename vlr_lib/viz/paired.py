"""Notebook 12's paired-difference browser: one difference of a lessons table (``report.lesson_table``), drawn
from the seeds it is made of -- each seed's a − b, their mean, its paired 95% interval and the wider interval
at the level Holm's correction tested it. Where the interval crosses 0 the seeds cannot tell."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .. import report
from ._style import CURVE, NEUTRAL, PALETTE, fitted_range, style

__all__ = ["paired_figure"]


def _row(table: pd.DataFrame, experiment: str, condition: str, comparison: str) -> pd.Series:
    part = report.lesson_part(table, experiment)
    rows = part[(part["condition"] == condition) & (part["comparison"] == comparison)]
    if rows.empty:
        raise ValueError(f"condition and comparison must name a row of experiment {experiment!r}, "
                         f"got {condition!r}, {comparison!r}")
    return rows.iloc[0]


def _bounded(row: pd.Series, low: str, high: str) -> bool:
    return bool(np.isfinite([row[low], row[high]]).all())  # one seed: an unbounded interval, not drawn


def _interval(x: str, row: pd.Series, low: str, high: str, name: str, colour: str) -> go.Scatter:
    bars = dict(type="data", symmetric=False, array=[row[high] - row["delta"]],
                arrayminus=[row["delta"] - row[low]], color=colour, width=10)
    return go.Scatter(x=[x], y=[row["delta"]], mode="markers", name=name, marker=dict(color=colour, size=12),
                      error_y=bars if _bounded(row, low, high) else None,
                      hovertemplate=f"{name}: %{{y:.1f}} [{row[low]:.1f}, {row[high]:.1f}]<extra></extra>")


def paired_figure(runs: pd.DataFrame, table: pd.DataFrame, experiment: str, condition: str,
                  comparison: str) -> go.Figure:
    """One difference of the lessons table `table` (made from `runs`): each seed's a − b, the mean with its
    uncorrected paired 95% interval, and the interval at Holm's level; the title says the verdict."""
    row = _row(table, experiment, condition, comparison)
    seeds = report.seed_differences(runs, experiment, condition, row["a"], row["b"], row["metric"])
    fig = go.Figure(go.Scatter(x=[f"seed {s}" for s in seeds.index], y=seeds.to_numpy(), mode="markers",
                               name="one seed's a − b", marker=dict(color=PALETTE[0], size=11, symbol="diamond"),
                               hovertemplate="%{x}: %{y:.1f}<extra></extra>"))
    fig.add_trace(_interval("mean", row, "ci_low", "ci_high", "mean, paired 95% interval", CURVE))
    shown = [*seeds, row["ci_low"], row["ci_high"], 0.0]  # fitted_range leaves out what is not finite
    if _bounded(row, "holm_low", "holm_high"):
        fig.add_trace(_interval("mean, Holm", row, "holm_low", "holm_high", "at Holm's level", NEUTRAL))
        shown += [row["holm_low"], row["holm_high"]]
    fig.add_hline(y=0.0, line_color=NEUTRAL, line_dash="dash")
    fig.update_yaxes(range=fitted_range(shown))
    label = report.METRIC_LABELS[row["metric"]]
    return style(fig, f"{condition}: {comparison}", height=420, yaxis=f"Δ test {label} (a − b)",
                 subtitle=f"{row['delta']:+.1f} [{row['ci_low']:+.1f}, {row['ci_high']:+.1f}] over "
                          f"{len(seeds)} seeds; Holm-corrected: {row['verdict']}")
