"""Figures of notebook 12 (:func:`deltas_figure`: one experiment, :func:`overview_figure`: all of them,
:func:`paired_figure`: one difference from its seeds, for the paired-difference browser) and notebook 03's difficulty
experiment (:func:`deltas_figure`): pure functions from ``report.lessons.lesson_table`` (or a table of its shape:
differences of rsum between two losses per condition, paired by seed, with 95% interval and verdict) to a figure."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..report.labels import METRIC_LABELS
from ..report.lessons import lesson_part, seed_differences
from ..stats import RANK_VERDICTS, VERDICTS
from ._style import CURVE, NEUTRAL, PALETTE, fitted_range, panels, position, style

__all__ = ["deltas_figure", "overview_figure", "paired_figure"]

#: Marker of each verdict: filled where a claimed order holds (no claim: a ahead), a cross: reverses (behind), open.
SYMBOLS = dict(zip((*VERDICTS, *RANK_VERDICTS), ("circle", "x", "circle-open") * 2))


def _traces(part: pd.DataFrame, show_legend: bool = True) -> list[go.Scatter]:
    first = part.drop_duplicates("condition")
    ticks = dict(zip(first["condition"], first["condition"]))  # the label of each condition on the x axis
    if "overlap" in first and first["experiment"].iloc[0] == "difficulty":  # with its measured scene overlap
        ticks = {c: f"{c}<br>overlap {o:.2f}" for c, o in zip(first["condition"], first["overlap"])}
    traces = []
    for k, (comparison, rows) in enumerate(part.groupby("comparison", sort=False)):
        colour = PALETTE[k % len(PALETTE)]
        sign = rows["expected"].iloc[0]  # the papers' sign, or None: a comparison with no claimed sign
        traces.append(go.Scatter(
            x=[ticks[c] for c in rows["condition"]], y=rows["delta"], mode="lines+markers",
            name=comparison if pd.isna(sign) else f"{comparison} (papers: {'> 0' if sign > 0 else '< 0'})",
            legendgroup=comparison, showlegend=show_legend, line=dict(color=colour, dash="dot"),
            marker=dict(color=colour, size=11, symbol=[SYMBOLS[v] for v in rows["verdict"]], line=dict(width=2)),
            error_y=dict(type="data", array=rows["half"], visible=True, color=colour),
            customdata=rows[["half", "verdict", "seed_min", "seed_max", "source"]].to_numpy(),
            hovertemplate="%{x}<br>" + comparison + ": %{y:.1f} ± %{customdata[0]:.1f}<br>verdict: "
                          "%{customdata[1]} (%{customdata[4]})<br>per seed %{customdata[2]:.1f} to %{customdata[3]:.1f}"
                          "<extra></extra>",
        ))
    return traces


def deltas_figure(table: pd.DataFrame, experiment: str, title: str | None = None) -> go.Figure:
    """One experiment of a lesson table: rsum differences per condition, mean ± half-width of the paired 95% interval.

    Notebook 12: Triplet-SH − Triplet (papers: > 0), Unified − Triplet-SH (> 0), NT-Xent − Triplet-SH (< 0); 03:
    SigLIP − NT-Xent (no claim). Markers (Holm): filled: the order holds (a ahead); cross: reverses (behind); open.
    """
    part = lesson_part(table, experiment)
    fig = go.Figure(_traces(part))
    fig.add_hline(y=0.0, line_color=NEUTRAL, line_dash="dash")
    label = METRIC_LABELS[part["metric"].iloc[0]]
    return style(fig, title or f"{experiment}: differences of test {label} between losses", height=460,
                 xaxis="condition", yaxis=f"Δ {label} (a − b)")


def overview_figure(table: pd.DataFrame, labels: Mapping[str, str] | None = None) -> go.Figure:
    """Every experiment of a lesson table in one grid (two per row), drawn as :func:`deltas_figure` draws one."""
    experiments = list(dict.fromkeys(table["experiment"]))
    labels = dict(labels or {})
    fig, cols, height = panels([labels.get(e, e) for e in experiments], 2, first_px=540, row_px=380)
    for i, exp in enumerate(experiments):
        row, col = position(i, cols)
        fig.add_traces(_traces(lesson_part(table, exp), show_legend=i == 0), rows=row, cols=col)
        fig.add_hline(y=0.0, line_color=NEUTRAL, line_dash="dash", row=row, col=col)
    label = METRIC_LABELS[table["metric"].iloc[0]]
    return style(fig, "When do the papers' orderings hold?", height=height,
                 subtitle=f"Δ test {label} between losses, paired by seed: mean ± 95% interval")


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
