"""Notebook 12's paired-difference browser: one difference of ``report.lessons.lesson_table`` drawn from its seeds."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..report.labels import METRIC_LABELS
from ..report.lessons import lesson_part, seed_differences
from ._style import CURVE, NEUTRAL, PALETTE, fitted_range, style


def paired_figure(runs: pd.DataFrame, table: pd.DataFrame, experiment: str, condition: str,
                  comparison: str) -> go.Figure:
    """Each seed's a − b, their mean with its paired 95% interval, and the interval at the level Holm's correction
    tested it (an interval that one seed leaves unbounded is not drawn); the subtitle gives the verdict."""
    part = lesson_part(table, experiment)
    rows = part[(part["condition"] == condition) & (part["comparison"] == comparison)]
    if rows.empty:
        raise ValueError(f"condition and comparison must name a row of {experiment!r}, got {condition!r}, {comparison!r}")
    row = rows.iloc[0]
    seeds = seed_differences(runs, experiment, condition, row["a"], row["b"], row["metric"])
    fig = go.Figure(go.Scatter(x=[f"seed {s}" for s in seeds.index], y=seeds.to_numpy(), mode="markers",
                               name="one seed's a − b", marker=dict(color=PALETTE[0], size=11, symbol="diamond")))
    shown = [*seeds, 0.0]
    for x, low, high, name, colour in (("mean", "ci_low", "ci_high", "mean, paired 95% interval", CURVE),
                                       ("mean, Holm", "holm_low", "holm_high", "at Holm's level", NEUTRAL)):
        bounded = bool(np.isfinite([row[low], row[high]]).all())
        bars = dict(type="data", symmetric=False, array=[row[high] - row["delta"]],
                    arrayminus=[row["delta"] - row[low]], color=colour, width=10)
        fig.add_trace(go.Scatter(x=[x], y=[row["delta"]], mode="markers", name=name,
                                 marker=dict(color=colour, size=12), error_y=bars if bounded else None))
        shown += [row[low], row[high]] if bounded else []
    fig.add_hline(y=0.0, line_color=NEUTRAL, line_dash="dash")
    fig.update_yaxes(range=fitted_range(shown))
    return style(fig, f"{condition}: {comparison}", height=420, yaxis=f"Δ test {METRIC_LABELS[row['metric']]} (a − b)",
                 subtitle=f"{row['delta']:+.1f} [{row['ci_low']:+.1f}, {row['ci_high']:+.1f}] over {len(seeds)} seeds; "
                          f"Holm-corrected: {row['verdict']}")
